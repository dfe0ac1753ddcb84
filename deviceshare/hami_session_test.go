package deviceshare

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/protocol/nodelock"
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

// The binder takes HAMi's lock with the pod's name; a live lock another pod
// holds refuses the bind, unless that pod is gone, which HAMi's scheduler
// treats as a dangling lock and so does the binder (the lock is an agent
// lock, device.Reservation.NodeLocks). A lock the backend's NodeLocker names is
// never taken over that way.
func TestBinderTakesOverDanglingHAMiLock(t *testing.T) {
	holder := types.NamespacedName{Namespace: "ns", Name: "holder"}
	tests := []struct {
		name       string
		holderLive bool
		agent      bool
		wantBound  bool
	}{
		{name: "holder pending: refused", holderLive: true, agent: true},
		{name: "holder gone: taken over", agent: true, wantBound: true},
		{name: "holder gone, not an agent lock: refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
				vgpuproto.HAMiNodeLock: nodelock.Format(time.Now().Add(-time.Minute), holder)}}}
			pod := phasePod("a", "")
			objs := []runtime.Object{node, pod}
			if tc.holderLive {
				objs = append(objs, phasePod(holder.Name, "allocating"))
			}
			client := fake.NewSimpleClientset(objs...)
			st := newTestState(Options{})
			defer st.Close()
			task := vcapi.NewTaskInfo(pod)
			task.NodeName = "n1"
			locks := &nodeLocks{keys: []string{vgpuproto.HAMiNodeLock}}
			if tc.agent {
				locks.agent = locks.keys
			}
			st.binder.annotate(task.UID, "n1", map[string]string{"k": "v"}, locks, nil, nil)
			errs := st.binder.Bind(client, []*vcapi.TaskInfo{task})
			if bound := len(errs) == 0; bound != tc.wantBound {
				t.Fatalf("Bind errors %v, want bound %v", errs, tc.wantBound)
			}
			n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := ",ns,holder"
			if tc.wantBound {
				want = ",ns,a"
			}
			if v := n.Annotations[vgpuproto.HAMiNodeLock]; !strings.HasSuffix(v, want) {
				t.Errorf("lock %q after Bind, want one ending %q", v, want)
			}
		})
	}
}
