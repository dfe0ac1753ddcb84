package mindcluster

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/mindclusterproto"
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

// is310P reports whether the node is a MindCluster 310P node: a positive
// huawei.com/npu-core capacity and a servertype label of kind Ascend310P
// (or, to report a missing label, the 310P chip list without a servertype).
func (b *Backend) is310P(node *v1.Node) bool {
	q, ok := node.Status.Capacity[mindclusterproto.ResourceNPUCore]
	if !ok || q.Sign() <= 0 {
		return false
	}
	if st, ok := node.Labels[mindclusterproto.LabelServerType]; ok {
		return strings.Split(st, "-")[0] == mindclusterproto.ServerTypeKind
	}
	if _, ok := node.Annotations[mindclusterproto.AnnotationFreeChips]; ok {
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
	st, ok := node.Labels[mindclusterproto.LabelServerType]
	if !ok {
		return nil, fmt.Errorf("label %s is missing: want %s-<AI cores per chip>, like %s-8", mindclusterproto.LabelServerType, mindclusterproto.ServerTypeKind, mindclusterproto.ServerTypeKind)
	}
	per, err := mindclusterproto.ServerTypeCores(st)
	if err != nil {
		return nil, err
	}
	inv.serverType, inv.perChip = st, per
	if inv.chip, err = vnpu.Ascend310PWithCores(inv.perChip); err != nil {
		return nil, fmt.Errorf("label %s=%q: %w", mindclusterproto.LabelServerType, st, err)
	}
	if inv.chipName = node.Labels[mindclusterproto.LabelChipName]; inv.chipName == "" {
		return nil, fmt.Errorf("label %s is missing or empty: want the chip model, like 310P3", mindclusterproto.LabelChipName)
	}
	q := node.Status.Capacity[mindclusterproto.ResourceNPUCore]
	cores, ok := q.AsInt64()
	if !ok || cores%int64(per) != 0 {
		return nil, fmt.Errorf("capacity %s=%s: want a whole multiple of the %d AI cores per chip of label %s=%q",
			mindclusterproto.ResourceNPUCore, q.String(), per, mindclusterproto.LabelServerType, st)
	}
	inv.totalChips = int(cores / int64(per))

	lists := map[string]string{}
	for _, k := range [...]string{mindclusterproto.AnnotationFreeChips, mindclusterproto.AnnotationUnhealthyChips} {
		if v, ok := node.Annotations[k]; ok {
			lists[k] = v
		}
	}
	if cm, ok := b.deviceInfo(node.Name); ok {
		dl, err := mindclusterproto.DecodeDeviceInfo(cm)
		if err != nil {
			return nil, err
		}
		inv.from = "ConfigMap " + cm.Namespace + "/" + cm.Name
		for _, k := range [...]string{mindclusterproto.AnnotationFreeChips, mindclusterproto.AnnotationUnhealthyChips} {
			if v, ok := dl[k]; ok {
				lists[k] = v
			}
		}
	}
	free, ok := lists[mindclusterproto.AnnotationFreeChips]
	if !ok {
		return nil, fmt.Errorf("no %s chip list: neither ConfigMap %s/%s%s (%s.DeviceInfo.DeviceList) nor the node annotation names it",
			mindclusterproto.AnnotationFreeChips, mindclusterproto.DeviceInfoNamespace, mindclusterproto.DeviceInfoPrefix, node.Name, mindclusterproto.DeviceInfoKey)
	}
	if inv.unhealthy, err = mindclusterproto.DecodeChips(lists[mindclusterproto.AnnotationUnhealthyChips]); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", inv.from, mindclusterproto.AnnotationUnhealthyChips, err)
	}
	all, err := mindclusterproto.DecodeChips(free)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", inv.from, mindclusterproto.AnnotationFreeChips, err)
	}
	for _, id := range all {
		if !slices.Contains(inv.unhealthy, id) {
			inv.free = append(inv.free, id)
		}
	}
	if n := len(inv.free) + len(inv.unhealthy); n > inv.totalChips {
		return nil, fmt.Errorf("%s lists %d chips in %s and %s, but capacity %s=%s makes %d chips of %d AI cores",
			inv.from, n, mindclusterproto.AnnotationFreeChips, mindclusterproto.AnnotationUnhealthyChips, mindclusterproto.ResourceNPUCore, q.String(), inv.totalChips, per)
	}
	return inv, nil
}
