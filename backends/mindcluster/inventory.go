package mindcluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/vnpu"
)

// DeviceInfoSource gives the device-info ConfigMap MindCluster's device
// plugin keeps for a node (kube-system/mindx-dl-deviceinfo-<node>). ok is
// false when there is none (yet). Implementations are safe for concurrent
// use and never call the API server (an informer's lister).
type DeviceInfoSource interface {
	DeviceInfo(node string) (cm *v1.ConfigMap, ok bool)
}

// inventory is a node's decoded 310P registration. It is immutable and
// shared by every copy of the node's Devices.
type inventory struct {
	node       string
	serverType string
	chipName   string
	perChip    int32
	totalChips int
	chip       *vnpu.Chip
	// free and unhealthy are the chip IDs the lists name, sorted; a chip
	// in both is unhealthy only.
	free, unhealthy []int
	// from says where the lists came from, for logs and errors.
	from string
}

// deviceInfoDoc is the ConfigMap's DeviceInfoCfg document.
type deviceInfoDoc struct {
	DeviceInfo json.RawMessage
	CheckCode  string
}

// deviceInfo is the part CheckCode covers.
type deviceInfo struct {
	DeviceList map[string]string
	UpdateTime int64
}

// is310P reports whether the node is a MindCluster 310P node: a positive
// huawei.com/npu-core capacity and a servertype label of kind Ascend310P
// (or, to report a missing label, the 310P chip list without a servertype).
func (b *Backend) is310P(node *v1.Node) bool {
	q, ok := node.Status.Capacity[ResourceNPUCore]
	if !ok || q.Sign() <= 0 {
		return false
	}
	if st, ok := node.Labels[LabelServerType]; ok {
		return strings.Split(st, "-")[0] == ServerTypeKind
	}
	if _, ok := node.Annotations[AnnotationFreeChips]; ok {
		return true
	}
	_, ok = b.deviceInfo(node.Name)
	return ok
}

func (b *Backend) deviceInfo(node string) (*v1.ConfigMap, bool) {
	if b.source == nil {
		return nil, false
	}
	cm, ok := b.source.DeviceInfo(node)
	return cm, ok && cm != nil
}

// decodeInventory reads a 310P node's labels, capacity and chip lists. The
// lists are the node's annotations overridden, key by key, by the
// device-info ConfigMap's DeviceList, as Volcano's plugin merges them.
func (b *Backend) decodeInventory(node *v1.Node) (*inventory, error) {
	inv := &inventory{node: node.Name, from: "node annotations"}
	st, ok := node.Labels[LabelServerType]
	if !ok {
		return nil, fmt.Errorf("label %s is missing: want %s-<AI cores per chip>, like %s-8", LabelServerType, ServerTypeKind, ServerTypeKind)
	}
	f := strings.Split(st, "-")
	var per int64
	var err error
	if len(f) >= 2 && f[0] == ServerTypeKind {
		per, err = strconv.ParseInt(f[1], 10, 32)
	}
	if len(f) < 2 || f[0] != ServerTypeKind || err != nil || per <= 0 {
		return nil, fmt.Errorf("label %s=%q: want %s-<AI cores per chip>[-suffix], like %s-8", LabelServerType, st, ServerTypeKind, ServerTypeKind)
	}
	inv.serverType, inv.perChip = st, int32(per)
	if inv.chip, err = vnpu.Ascend310PWithCores(inv.perChip); err != nil {
		return nil, fmt.Errorf("label %s=%q: %w", LabelServerType, st, err)
	}
	if inv.chipName = node.Labels[LabelChipName]; inv.chipName == "" {
		return nil, fmt.Errorf("label %s is missing or empty: want the chip model, like 310P3", LabelChipName)
	}
	q := node.Status.Capacity[ResourceNPUCore]
	cores, ok := q.AsInt64()
	if !ok || cores%per != 0 {
		return nil, fmt.Errorf("capacity %s=%s: want a whole multiple of the %d AI cores per chip of label %s=%q",
			ResourceNPUCore, q.String(), per, LabelServerType, st)
	}
	inv.totalChips = int(cores / per)

	lists := map[string]string{}
	for _, k := range [...]string{AnnotationFreeChips, AnnotationUnhealthyChips} {
		if v, ok := node.Annotations[k]; ok {
			lists[k] = v
		}
	}
	if cm, ok := b.deviceInfo(node.Name); ok {
		dl, err := parseDeviceInfo(cm)
		if err != nil {
			return nil, err
		}
		inv.from = "ConfigMap " + cm.Namespace + "/" + cm.Name
		for _, k := range [...]string{AnnotationFreeChips, AnnotationUnhealthyChips} {
			if v, ok := dl[k]; ok {
				lists[k] = v
			}
		}
	}
	free, ok := lists[AnnotationFreeChips]
	if !ok {
		return nil, fmt.Errorf("no %s chip list: neither ConfigMap %s/%s%s (%s.DeviceInfo.DeviceList) nor the node annotation names it",
			AnnotationFreeChips, DeviceInfoNamespace, DeviceInfoPrefix, node.Name, DeviceInfoKey)
	}
	if inv.unhealthy, err = parseChips(lists[AnnotationUnhealthyChips]); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", inv.from, AnnotationUnhealthyChips, err)
	}
	all, err := parseChips(free)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", inv.from, AnnotationFreeChips, err)
	}
	for _, id := range all {
		if !slices.Contains(inv.unhealthy, id) {
			inv.free = append(inv.free, id)
		}
	}
	if n := len(inv.free) + len(inv.unhealthy); n > inv.totalChips {
		return nil, fmt.Errorf("%s lists %d chips in %s and %s, but capacity %s=%s makes %d chips of %d AI cores",
			inv.from, n, AnnotationFreeChips, AnnotationUnhealthyChips, ResourceNPUCore, q.String(), inv.totalChips, per)
	}
	return inv, nil
}

// parseDeviceInfo decodes the ConfigMap's DeviceInfoCfg and verifies its
// CheckCode, the SHA-256 (hex) of the JSON of DeviceInfo as the device
// plugin marshals it. It returns DeviceInfo.DeviceList.
func parseDeviceInfo(cm *v1.ConfigMap) (map[string]string, error) {
	where := "ConfigMap " + cm.Namespace + "/" + cm.Name
	raw, ok := cm.Data[DeviceInfoKey]
	if !ok {
		return nil, fmt.Errorf("%s: data key %s is missing", where, DeviceInfoKey)
	}
	var doc deviceInfoDoc
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, fmt.Errorf("%s: %s: invalid JSON: %w", where, DeviceInfoKey, err)
	}
	if len(doc.DeviceInfo) == 0 || string(doc.DeviceInfo) == "null" {
		return nil, fmt.Errorf("%s: %s.DeviceInfo is missing", where, DeviceInfoKey)
	}
	var info deviceInfo
	if err := json.Unmarshal(doc.DeviceInfo, &info); err != nil {
		return nil, fmt.Errorf("%s: %s.DeviceInfo: %w", where, DeviceInfoKey, err)
	}
	if doc.CheckCode == "" {
		return nil, fmt.Errorf("%s: %s.CheckCode is empty: want the SHA-256 of DeviceInfo", where, DeviceInfoKey)
	}
	if !checkCodeMatches(doc.CheckCode, doc.DeviceInfo, info) {
		return nil, fmt.Errorf("%s: %s.CheckCode=%q does not match DeviceInfo (SHA-256 %s): the document is corrupt or was edited by hand",
			where, DeviceInfoKey, doc.CheckCode, hashOf(compact(doc.DeviceInfo)))
	}
	if info.DeviceList == nil {
		return nil, fmt.Errorf("%s: %s.DeviceInfo.DeviceList is missing", where, DeviceInfoKey)
	}
	return info.DeviceList, nil
}

// checkCodeMatches accepts the hash of DeviceInfo as written (compacted),
// which holds whatever fields a newer device plugin adds, or of the two
// fields this backend knows, re-marshalled.
func checkCodeMatches(code string, raw json.RawMessage, info deviceInfo) bool {
	if hashOf(compact(raw)) == code {
		return true
	}
	again, err := json.Marshal(info)
	return err == nil && hashOf(again) == code
}

func compact(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// DeviceInfoCheckCode returns the CheckCode MindCluster's device plugin
// writes for a DeviceList and UpdateTime, for tests and tools that write
// device-info ConfigMaps the way the plugin does.
func DeviceInfoCheckCode(deviceList map[string]string, updateTime int64) string {
	b, err := json.Marshal(deviceInfo{DeviceList: deviceList, UpdateTime: updateTime})
	if err != nil {
		return ""
	}
	return hashOf(b)
}

// DeviceInfoData returns the ConfigMap data the device plugin writes for a
// DeviceList and UpdateTime: DeviceInfoCfg with its CheckCode.
func DeviceInfoData(deviceList map[string]string, updateTime int64) map[string]string {
	info := deviceInfo{DeviceList: deviceList, UpdateTime: updateTime}
	raw, err := json.Marshal(info)
	if err != nil {
		return nil
	}
	doc, err := json.Marshal(deviceInfoDoc{DeviceInfo: raw, CheckCode: hashOf(raw)})
	if err != nil {
		return nil
	}
	return map[string]string{DeviceInfoKey: string(doc)}
}

// parseChips reads a chip list like "Ascend310P-0,Ascend310P-3" into sorted
// IDs. Empty entries are skipped, as upstream does; other entries must be
// Ascend310P-<id> with a distinct non-negative decimal id.
func parseChips(s string) ([]int, error) {
	var ids []int
	for _, e := range strings.Split(s, ",") {
		if e == "" {
			continue
		}
		digits, ok := strings.CutPrefix(e, ChipPrefix)
		id, err := strconv.Atoi(digits)
		if !ok || err != nil || id < 0 || strconv.Itoa(id) != digits {
			return nil, fmt.Errorf("chip %q: want %s<id>, like %s0", e, ChipPrefix, ChipPrefix)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("chip %q listed twice", e)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}
