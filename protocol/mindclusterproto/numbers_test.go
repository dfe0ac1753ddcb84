package mindclusterproto

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestNumbersHaveOneSpelling names the rule every number here is read by
// (protocol/internal/wireint): only as strconv.Itoa writes it, as
// MindCluster's device plugin writes chip IDs, vNPU groups and the
// device-info document. "0" is chip 0; "00", "+0", "-0" and "03" are
// refused (or, in AscendReal, are no group).
func TestNumbersHaveOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		value  string
		wantOK bool
	}{
		{"0", true}, {"3", true}, {"00", false}, {"+0", false}, {"-0", false}, {"03", false}, {"+3", false},
	} {
		if a, err := DecodeNPUCore(tc.value); (err == nil) != tc.wantOK {
			t.Errorf("DecodeNPUCore(%q) = %+v, %v; want ok %v", tc.value, a, err, tc.wantOK)
		}
		if a, err := DecodeNPUCore(tc.value + "-vir02"); (err == nil) != tc.wantOK {
			t.Errorf("DecodeNPUCore(%q) = %+v, %v; want ok %v", tc.value+"-vir02", a, err, tc.wantOK)
		}
		if ids, err := DecodeChips(ChipPrefix + tc.value); (err == nil) != tc.wantOK {
			t.Errorf("DecodeChips(%q) = %v, %v; want ok %v", ChipPrefix+tc.value, ids, err, tc.wantOK)
		}
		if g, ok := VNPUGroup("Ascend310P-2c.1cpu-105-0_" + tc.value); ok != tc.wantOK {
			t.Errorf("VNPUGroup(..._%s) = %d, %v; want ok %v", tc.value, g, ok, tc.wantOK)
		}
	}
	for value, wantOK := range map[string]bool{
		"Ascend310P-8": true, "Ascend310P-10-dual": true, "Ascend310P-08": false, "Ascend310P-+8": false, "Ascend310P-0": false,
	} {
		if per, err := ServerTypeCores(value); (err == nil) != wantOK {
			t.Errorf("ServerTypeCores(%q) = %d, %v; want ok %v", value, per, err, wantOK)
		}
	}
}

// TestDeviceInfoUpdateTimeHasOneSpelling: the document's UpdateTime, a JSON
// integer, follows the same rule even when the CheckCode matches.
func TestDeviceInfoUpdateTimeHasOneSpelling(t *testing.T) {
	for value, wantErr := range map[string]string{
		"5":   "",
		"-0":  "cannot unmarshal number -0",
		"5.0": "cannot unmarshal number 5.0",
	} {
		info := `{"DeviceList":{"huawei.com/Ascend310P":"Ascend310P-0"},"UpdateTime":` + value + `}`
		doc := `{"DeviceInfo":` + info + `,"CheckCode":"` + hashOf([]byte(info)) + `"}`
		_, err := DecodeDeviceInfo(&v1.ConfigMap{Data: map[string]string{DeviceInfoKey: doc}})
		if (err == nil) != (wantErr == "") || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("UpdateTime %s: error %v, want %q", value, err, wantErr)
		}
	}
}
