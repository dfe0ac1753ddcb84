package vgpu

import (
	"strings"
	"testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// FuzzAddResource accounts a pod whose volcano.sh/vgpu-ids-new is fuzzed on
// a node with two shared cards and one MIG card. A refusal names the
// annotation and leaves the state alone; an accepted record is idempotent,
// leaves no usage negative, and SubResource restores exactly the state
// before AddResource.
func FuzzAddResource(f *testing.F) {
	for _, s := range []string{
		"GPU-0,NVIDIA,4000,10:",
		"GPU-0,NVIDIA,4000,10:GPU-1,NVIDIA,4000,0:",
		";GPU-1,NVIDIA,16384,100:",
		"GPU-m[group1-0],NVIDIA,4000,0:",
		"GPU-m[group1-0],NVIDIA,4000,0:;GPU-m[group1-1],NVIDIA,4000,0:",
		"GPU-m[group1-0],NVIDIA,4000,0:GPU-m[group1-0],NVIDIA,4000,0:",
		"GPU-m[nogroup-0],NVIDIA,4000,0:",
		"GPU-0[group1-0],NVIDIA,4000,0:",
		"GPU-0,NVIDIA,4000,10:GPU-0,NVIDIA,4000,10:",
		"GPU-9,NVIDIA,4000,10:",
		"GPU-0,NVIDIA,-1,10:",
		"GPU-0,NVIDIA,4000,101:",
		"GPU-0,NVIDIA,4000:",
		"GPU-0,NVIDIA,4000,10::",
		";;;",
		"",
	} {
		f.Add(s, uint8(2))
	}
	// With init containers (containers/4%3 of them, the first a sidecar
	// when containers&16): their entries first.
	f.Add("GPU-0,NVIDIA,12000,60:;GPU-0,NVIDIA,4000,30:", uint8(4))
	f.Add("GPU-0,NVIDIA,1000,10:;GPU-0,NVIDIA,6000,50:;GPU-0,NVIDIA,2000,20:", uint8(8|16))
	f.Add("GPU-m[group1-0],NVIDIA,4000,0:;GPU-m[group1-1],NVIDIA,4000,0:", uint8(4))
	node := vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384),
		gpu("GPU-m", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(vgpuproto.ModeMIG)})
	f.Fuzz(func(t *testing.T, value string, containers uint8) {
		d := devicesOf(t, newBackend(t), node)
		n, inits := 1+int(containers)%4, int(containers/4)%3
		pod := vpod("p", make([]ctr, n), vgpuproto.AnnotationIDs, value)
		if inits > 0 {
			kinds := strings.Repeat("i", inits)
			if containers&16 != 0 {
				kinds = "s" + kinds[1:]
			}
			pod = withInit(pod, kinds, make([]ctr, inits)...)
		}
		acc := testkit.Account(t, d, pod, vgpuproto.AnnotationIDs)
		if acc == nil {
			return
		}
		for _, c := range testkit.Usage(d) {
			if c.MemoryUsedMiB < 0 || c.CoresUsed < 0 || c.Pods < 0 || c.Pods > n+inits {
				t.Errorf("card %+v after accounting %q", c, value)
			}
		}
		acc.CheckRoundTrip(t)
	})
}
