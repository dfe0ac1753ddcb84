package ascend

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// TestCordon: hami.io/device-cordon takes a chip out of scheduling; a pod
// holding it stays accounted; an entry naming no chip is a warning.
func TestCordon(t *testing.T) {
	cards := []card{npu("NPU-0", 65536), npu("NPU-1", 65536)}
	pod := npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}})

	d := devicesOf(t, newTestBackend(t, "Ascend910B3", false),
		ascendNode("n", "Ascend910B3", cards, ascendproto.AnnotationDeviceCordon, "NPU-0"))
	r := testkit.Allocate(t, d, pod, device.PolicyBinpack)
	if v := r.Annotations[ascendproto.KeysFor("Ascend910B3").Allocated]; !strings.Contains(v, "NPU-1") || strings.Contains(v, "NPU-0") {
		t.Errorf("allocated %q, want NPU-1 (NPU-0 is cordoned)", v)
	}
	usage, _ := d.CardUsage()
	if !usage[0].Cordoned || usage[1].Cordoned {
		t.Errorf("CardUsage cordoned = %v, %v; want true, false", usage[0].Cordoned, usage[1].Cordoned)
	}

	all := devicesOf(t, newTestBackend(t, "Ascend910B3", false),
		ascendNode("n", "Ascend910B3", cards, ascendproto.AnnotationDeviceCordon, "NPU-0, NPU-1"))
	st := all.FilterNode(pod, device.PolicyBinpack)
	if st.IsSuccess() || st.Code != device.UnschedulableAndUnresolvable {
		t.Fatalf("FilterNode = %+v, want unresolvable", st)
	}
	if diff := cmp.Diff([]string{ReasonCordoned}, st.Reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if w := all.InventoryWarnings(); len(w) != 0 {
		t.Errorf("warnings %v for a valid cordon", w)
	}

	bad := devicesOf(t, newTestBackend(t, "Ascend910B3", false),
		ascendNode("n", "Ascend910B3", cards, ascendproto.AnnotationDeviceCordon, "NPU-0,NPU-7"))
	w := bad.InventoryWarnings()
	if len(w) != 1 || !strings.Contains(w[0].Error(), ascendproto.AnnotationDeviceCordon) || !strings.Contains(w[0].Error(), `"NPU-7"`) {
		t.Errorf("warnings %v, want one naming %s and \"NPU-7\"", w, ascendproto.AnnotationDeviceCordon)
	}
	if usage, _ := bad.CardUsage(); !usage[0].Cordoned {
		t.Error("the valid entry NPU-0 is not cordoned next to a bad one")
	}
}
