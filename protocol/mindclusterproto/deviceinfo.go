package mindclusterproto

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// deviceInfoDoc is the ConfigMap's DeviceInfoCfg document (the device
// plugin's NodeDeviceInfoCache).
type deviceInfoDoc struct {
	DeviceInfo json.RawMessage
	CheckCode  string
}

// deviceInfo is the part CheckCode covers.
type deviceInfo struct {
	DeviceList map[string]string
	UpdateTime wireint.Int
}

// DecodeDeviceInfo decodes the device-info ConfigMap's DeviceInfoCfg and
// verifies its CheckCode, the SHA-256 (hex) of the JSON of DeviceInfo as
// the device plugin marshals it (MakeDataHash). It returns
// DeviceInfo.DeviceList, whose keys are node annotation keys
// (AnnotationFreeChips, AnnotationUnhealthyChips). Errors start with
// "ConfigMap <namespace>/<name>: DeviceInfoCfg".
func DecodeDeviceInfo(cm *v1.ConfigMap) (map[string]string, error) {
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
// fields this package knows, re-marshalled.
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
// writes for a DeviceList and UpdateTime.
func DeviceInfoCheckCode(deviceList map[string]string, updateTime int64) string {
	b, err := json.Marshal(deviceInfo{DeviceList: deviceList, UpdateTime: wireint.Int(updateTime)})
	if err != nil {
		return ""
	}
	return hashOf(b)
}

// DeviceInfoData returns the ConfigMap data the device plugin writes for a
// DeviceList and UpdateTime: DeviceInfoCfg with its CheckCode
// (WriteDeviceInfoDataIntoCM).
func DeviceInfoData(deviceList map[string]string, updateTime int64) map[string]string {
	info := deviceInfo{DeviceList: deviceList, UpdateTime: wireint.Int(updateTime)}
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
