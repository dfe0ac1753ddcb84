package ascend

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/backends/internal/testkit"
)

const fuzzChip = "Ascend910B3"

// FuzzAddResource accounts a pod whose hami.io/<commonWord>-devices-allocated
// is fuzzed, on a two-card node in either mode. A refusal names the
// annotation and leaves the state alone; an accepted record charges only
// registered cards, never more memory than a card has per use, and
// SubResource gives back exactly what AddResource took.
func FuzzAddResource(f *testing.F) {
	for _, s := range []string{
		"NPU-0,Ascend910B3,16384,0:;",
		"NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
		"NPU-0,Ascend910B3,10000,30:;",
		"NPU-0,Ascend910B3,10000,30:",
		";NPU-1,Ascend910B3,1,100:;",
		"NPU-0,Ascend910B3,16384,0:NPU-0,Ascend910B3,16384,0:;",
		"NPU-9,Ascend910B3,16384,0:;",
		"NPU-0,Ascend310P,16384,0:;",
		"NPU-0,Ascend910B3,65537,0:;",
		"NPU-0,Ascend910B3,0,0:;",
		"NPU-0,Ascend910B3,1,101:;",
		"NPU-0,Ascend910B3,1,1;",
		";;;;",
		"",
	} {
		f.Add(s, uint8(2), false)
	}
	f.Add("NPU-0,Ascend910B3,10000,30:;", uint8(1), true)
	node := ascendNode("n1", fuzzChip, []card{npu("NPU-0", 65536), npu("NPU-1", 65536).inNetwork(1)})
	f.Fuzz(func(t *testing.T, value string, containers uint8, hamiCore bool) {
		b := newTestBackend(t, fuzzChip, hamiCore)
		d := devicesOf(t, b, node)
		pod := npuPod("p", fuzzChip, make([]ctr, 1+int(containers)%4), b.Keys().Allocated, value)
		acc := testkit.Account(t, d, pod, b.Keys().Allocated)
		if acc == nil {
			return
		}
		for _, c := range testkit.Usage(d) {
			if c.MemoryUsedMiB < 0 || c.CoresUsed < 0 || c.Pods < 0 || c.Pods > len(pod.Spec.Containers) {
				t.Errorf("card %+v after accounting %q", c, value)
			}
		}
		uses, err := d.decode(value, len(pod.Spec.Containers))
		if err != nil {
			t.Fatalf("AddResource accepted %q that decode refuses: %v", value, err)
		}
		again, err := d.decode(d.encode(uses, len(pod.Spec.Containers)), len(pod.Spec.Containers))
		if err != nil || !cmp.Equal(uses, again, cmp.AllowUnexported(use{})) {
			t.Errorf("decode(encode(decode(%q))) = %v, %v; want %v", value, again, err, uses)
		}
		acc.CheckRoundTrip(t)
	})
}
