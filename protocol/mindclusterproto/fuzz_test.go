package mindclusterproto

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDeviceInfo decodes the device-info ConfigMap's DeviceInfoCfg. With
// build false the document is the fuzzed text; with build true it is built
// from a fuzzed DeviceInfo with its correct CheckCode, so the fuzzer gets
// past the hash. A refusal names the ConfigMap and DeviceInfoCfg; an
// accepted document's CheckCode is the hash of its DeviceInfo, and its
// DeviceList written back by DeviceInfoData decodes the same.
func FuzzDeviceInfo(f *testing.F) {
	list := map[string]string{AnnotationFreeChips: EncodeChips(0, 1), AnnotationUnhealthyChips: EncodeChips(1)}
	good := DeviceInfoData(list, 1700000000)[DeviceInfoKey]
	info, _ := json.Marshal(deviceInfo{DeviceList: list, UpdateTime: 1700000000})
	for _, s := range []struct {
		doc   string
		build bool
	}{
		{good, false},
		{strings.Replace(good, "Ascend310P-0", "Ascend310P-3", 1), false},
		{`{"DeviceInfo":null,"CheckCode":"x"}`, false},
		{`{"DeviceInfo":{"DeviceList":{}},"CheckCode":""}`, false},
		{`{`, false},
		{string(info), true},
		{`{"DeviceList": {"huawei.com/Ascend310P": "Ascend310P-0"}, "UpdateTime": 1, "Extra": [1, 2]}`, true},
		{`{"UpdateTime": 1}`, true},
		{`{"DeviceList": {"huawei.com/Ascend310P": "Ascend310P-9"}}`, true},
		{`{"DeviceList": 5}`, true},
	} {
		f.Add(s.doc, s.build)
	}
	f.Fuzz(func(t *testing.T, doc string, build bool) {
		if build {
			code, err := json.Marshal(hashOf(compact([]byte(doc))))
			if err != nil {
				return
			}
			doc = `{"DeviceInfo":` + doc + `,"CheckCode":` + string(code) + `}`
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DeviceInfoNamespace, Name: DeviceInfoPrefix + "n1"},
			Data: map[string]string{DeviceInfoKey: doc}}
		where := "ConfigMap " + DeviceInfoNamespace + "/" + DeviceInfoPrefix + "n1: " + DeviceInfoKey
		dl, err := DecodeDeviceInfo(cm)
		if err != nil {
			if dl != nil || !strings.HasPrefix(err.Error(), where) {
				t.Errorf("DecodeDeviceInfo = %v, %q; want no list and an error starting with %q", dl, err, where)
			}
			return
		}
		checkDeviceList(t, cm, dl)
	})
}

func checkDeviceList(t *testing.T, cm *v1.ConfigMap, dl map[string]string) {
	t.Helper()
	var doc deviceInfoDoc
	if err := json.Unmarshal([]byte(cm.Data[DeviceInfoKey]), &doc); err != nil {
		t.Fatalf("accepted a document that is not JSON: %v", err)
	}
	var info deviceInfo
	if err := json.Unmarshal(doc.DeviceInfo, &info); err != nil {
		t.Fatalf("accepted DeviceInfo that does not decode: %v", err)
	}
	if !checkCodeMatches(doc.CheckCode, doc.DeviceInfo, info) || dl == nil {
		t.Fatalf("accepted CheckCode %q for DeviceInfo %s", doc.CheckCode, doc.DeviceInfo)
	}
	back := &v1.ConfigMap{ObjectMeta: cm.ObjectMeta, Data: DeviceInfoData(dl, int64(info.UpdateTime))}
	again, err := DecodeDeviceInfo(back)
	if err != nil {
		t.Fatalf("DeviceInfoData written back does not decode: %v", err)
	}
	if diff := cmp.Diff(dl, again); diff != "" {
		t.Errorf("DeviceList round trip (-decoded +re-decoded):\n%s", diff)
	}
}

// FuzzDecodeChips checks the chip list reader: a refusal names the chip; an
// accepted list is sorted and distinct, and EncodeChips writes it back to a
// list that decodes the same.
func FuzzDecodeChips(f *testing.F) {
	for _, s := range []string{"", "Ascend310P-0", "Ascend310P-3,Ascend310P-0", ",Ascend310P-0,,", "Ascend310P-00",
		"Ascend310P--1", "Ascend310P-0,Ascend310P-0", "Ascend910-0", "Ascend310P-+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ids, err := DecodeChips(value)
		if err != nil {
			if ids != nil || !strings.HasPrefix(err.Error(), "chip ") {
				t.Errorf("DecodeChips(%q) = %v, %v; want no chips and an error naming the chip", value, ids, err)
			}
			return
		}
		for i, id := range ids {
			if id < 0 || (i > 0 && ids[i-1] >= id) {
				t.Fatalf("DecodeChips(%q) = %v: not sorted, distinct and non-negative", value, ids)
			}
		}
		again, err := DecodeChips(EncodeChips(ids...))
		if err != nil || !cmp.Equal(ids, again) {
			t.Errorf("DecodeChips(EncodeChips(%v)) = %v, %v", ids, again, err)
		}
	})
}

// FuzzDecodeNPUCore checks the huawei.com/npu-core reader: an accepted
// value names distinct non-negative chips, a vNPU one chip, and
// EncodeNPUCore writes it back byte for byte.
func FuzzDecodeNPUCore(f *testing.F) {
	for _, s := range []string{"0-vir01", "0-vir02_1c", "0", "0,1,2,3", "0,0", "00", "0-", "0,1-vir01", "-1", "", "1-a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		a, err := DecodeNPUCore(value)
		if err != nil {
			if a.Chips != nil || a.Template != "" {
				t.Errorf("DecodeNPUCore(%q) = %+v with the error %v", value, a, err)
			}
			return
		}
		seen := map[int]bool{}
		for _, id := range a.Chips {
			if id < 0 || seen[id] {
				t.Errorf("DecodeNPUCore(%q) = %+v: chip %d negative or twice", value, a, id)
			}
			seen[id] = true
		}
		if len(a.Chips) == 0 || (a.Template != "" && len(a.Chips) != 1) {
			t.Errorf("DecodeNPUCore(%q) = %+v", value, a)
		}
		if got := EncodeNPUCore(a); got != value {
			t.Errorf("EncodeNPUCore(DecodeNPUCore(%q)) = %q", value, got)
		}
	})
}
