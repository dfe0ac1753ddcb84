package mindclusterproto

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDeviceInfoCheckCode(t *testing.T) {
	list := map[string]string{AnnotationFreeChips: EncodeChips(0, 1)}
	// The device plugin's hash is over json.Marshal of DeviceInfo: the
	// DeviceList map with sorted keys, then UpdateTime.
	raw := `{"DeviceList":{"huawei.com/Ascend310P":"Ascend310P-0,Ascend310P-1"},"UpdateTime":5}`
	if got, want := DeviceInfoCheckCode(list, 5), hashOf([]byte(raw)); got != want {
		t.Errorf("DeviceInfoCheckCode = %s, want %s", got, want)
	}
	// A pretty-printed document, or one with fields a newer device plugin
	// added inside DeviceInfo, verifies against what was written.
	pretty := "{\n  \"DeviceInfo\": {\n    \"DeviceList\": {\"huawei.com/Ascend310P\": \"Ascend310P-0,Ascend310P-1\"},\n" +
		"    \"UpdateTime\": 5\n  },\n  \"CheckCode\": \"" + hashOf([]byte(raw)) + "\"\n}"
	extended := `{"DeviceList":{"huawei.com/Ascend310P":"Ascend310P-0"},"UpdateTime":5,"Extra":1}`
	for name, data := range map[string]string{
		"pretty":   pretty,
		"extended": `{"DeviceInfo":` + extended + `,"SuperPodID":-1,"CheckCode":"` + hashOf([]byte(extended)) + `"}`,
	} {
		if _, err := DecodeDeviceInfo(&v1.ConfigMap{Data: map[string]string{DeviceInfoKey: data}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
