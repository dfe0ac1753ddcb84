package deviceshare

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// hamiNode turns a vGPU test node into one HAMi's NVIDIA device plugin
// registered: the same cards in hami.io/node-nvidia-register only.
func hamiNode(name string, cards ...vcard) *v1.Node {
	n := vgpuNode(name, cards...)
	reg := "["
	for i, c := range cards {
		if i > 0 {
			reg += ","
		}
		reg += `{"id":"` + c.uuid + `","count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","health":true}`
	}
	n.Annotations = map[string]string{vgpuproto.AnnotationHAMiRegister: reg + "]"}
	return n
}

// On a HAMi-registered node the pod is bound with HAMi's allocation and the
// binder takes hami.io/mutex.lock, which HAMi's plugin reads to find the pod
// and releases, whether or not deviceshare.NodeLockEnable is set; Volcano's
// "hamivgpu" lock, which nothing on that node would release, is not taken.
// A volcano.sh-registered node keeps today's locks.
func TestHAMiNodeBindsWithHAMiAllocationAndLock(t *testing.T) {
	tests := []struct {
		name      string
		args      string
		node      *v1.Node
		wantLocks []string
		wantHAMi  bool
	}{
		{name: "HAMi node", args: vgpuArgs, node: hamiNode("n1", vcard{"GPU-0", "", 16000}),
			wantLocks: []string{vgpuproto.HAMiNodeLock}, wantHAMi: true},
		{name: "HAMi node, NodeLockEnable", args: vgpuArgs + "\n      deviceshare.NodeLockEnable: true",
			node: hamiNode("n1", vcard{"GPU-0", "", 16000}), wantLocks: []string{vgpuproto.HAMiNodeLock}, wantHAMi: true},
		{name: "volcano node", args: vgpuArgs, node: vgpuNode("n1", vcard{"GPU-0", "", 16000})},
		{name: "volcano node, NodeLockEnable", args: vgpuArgs + "\n      deviceshare.NodeLockEnable: true",
			node: vgpuNode("n1", vcard{"GPU-0", "", 16000}), wantLocks: []string{vgpu.Name}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, schedulerConf(tc.args), []*v1.Node{tc.node}, nil)
			c.addJob(podGroup("pg1", 1), vgpuPod("a", "pg1", 1, 1000, 10))
			c.session(nil)
			b := c.waitBinds(1)[testNamespace+"/a"]
			if diff := cmp.Diff(tc.wantLocks, b.Locks); diff != "" {
				t.Errorf("node locks (-want +got):\n%s", diff)
			}
			hami, volcano := b.Annotations[vgpuproto.AnnotationHAMiToAllocate], b.Annotations[vgpuproto.AnnotationToAllocate]
			if tc.wantHAMi != (hami == "GPU-0,NVIDIA,1000,10:;") || tc.wantHAMi == (volcano != "") {
				t.Errorf("bound with %s=%q and %s=%q; want HAMi's only on the HAMi node", vgpuproto.AnnotationHAMiToAllocate, hami,
					vgpuproto.AnnotationToAllocate, volcano)
			}
			if b.Annotations[vgpuproto.AnnotationIDs] != "GPU-0,NVIDIA,1000,10:" {
				t.Errorf("%s=%q, want the durable record on every node", vgpuproto.AnnotationIDs, b.Annotations[vgpuproto.AnnotationIDs])
			}
		})
	}
}
