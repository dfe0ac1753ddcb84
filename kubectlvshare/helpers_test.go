package kubectlvshare

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcfake "volcano.sh/apis/pkg/client/clientset/versioned/fake"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// update rewrites the golden files under testdata/.
var update = flag.Bool("update", false, "rewrite the golden files")

// t0 is the creation time of the first object; later ones follow by seconds.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// a100 is a card of the volcano.sh registration.
func a100(uuid string, healthy bool) vgpuproto.Card {
	return vgpuproto.Card{UUID: uuid, Count: 10, MemMiB: 40960, Type: "NVIDIA-A100-SXM4-40GB", Healthy: healthy, Mode: vgpuproto.ModeHAMiCore}
}

// node returns a node with the annotation key/value pairs.
func node(name string, annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}, CreationTimestamp: metav1.NewTime(t0)}}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

// vgpuPod returns a pod asking for n cards of mem MiB and cores percent,
// bound to nodeName (when not empty) with the allocation ids and bind phase.
func vgpuPod(ns, name string, created int, n, mem, cores int64, nodeName, ids, phase string) *v1.Pod {
	l := v1.ResourceList{vgpuproto.ResourceNumber: *resource.NewQuantity(n, resource.DecimalSI)}
	setPositive(l, vgpuproto.ResourceMemory, mem)
	setPositive(l, vgpuproto.ResourceCores, cores)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
		Spec: v1.PodSpec{SchedulerName: "volcano", NodeName: nodeName,
			Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Limits: l}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if nodeName != "" {
		p.Status.Phase = v1.PodRunning
		p.Annotations[vgpuproto.AnnotationIDs] = ids
		p.Annotations[vgpuproto.AnnotationBindPhase] = phase
	}
	return p
}

// fixture is a small cluster: two A100 nodes (one cordoned, registered in
// HAMi's dialect), a MIG node, a node whose registration is malformed, an
// Ascend 910B3 node in template mode, pods sharing their cards (one with a
// malformed allocation, one the agent refused), and a gang pod that waits.
func fixture(t *testing.T) ([]runtime.Object, []runtime.Object) {
	t.Helper()
	hami := `[{"id":"GPU-b0","count":4,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla-T4","health":true},` +
		`{"id":"GPU-b1","count":4,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla-T4","health":true}]`
	mig := a100("GPU-m0", true)
	mig.Count, mig.Mode = 7, vgpuproto.ModeMIG
	cordoned := node("gpu-b", vgpuproto.AnnotationHAMiRegister, hami)
	cordoned.Spec.Unschedulable = true
	npuNode, npuPods := ascendFixture(t)
	kube := []runtime.Object{
		node("gpu-a", vgpuproto.AnnotationRegister, vgpuproto.EncodeRegister([]vgpuproto.Card{
			a100("GPU-a0", true), a100("GPU-a1", true), a100("GPU-a2", true), a100("GPU-a3", true), a100("GPU-a4", false)})),
		cordoned,
		node("gpu-mig", vgpuproto.AnnotationRegister, vgpuproto.EncodeRegister([]vgpuproto.Card{mig})),
		node("gpu-broken", vgpuproto.AnnotationRegister, "GPU-x,ten,40960,NVIDIA-A100,true:"),
		npuNode,
		vgpuPod("team", "infer-0", 1, 1, 12000, 40, "gpu-a", "GPU-a0,NVIDIA,12000,40:", "success"),
		vgpuPod("team", "infer-1", 2, 1, 8000, 20, "gpu-a", "GPU-a0,NVIDIA,8000,20:", "success"),
		vgpuPod("team", "train-0", 3, 2, 30000, 50, "gpu-a", "GPU-a1,NVIDIA,30000,50:GPU-a2,NVIDIA,30000,50:", "success"),
		vgpuPod("team", "notebook", 4, 1, 20000, 10, "gpu-a", "GPU-a3,NVIDIA,20000,10:", "success"),
		vgpuPod("team", "bad", 4, 1, 1000, 0, "gpu-b", "GPU-b0,NVIDIA,lots,0:", "allocating"),
		vgpuPod("team", "refused", 5, 1, 1000, 0, "gpu-b", "GPU-b1,NVIDIA,1000,0:", "failed"),
		vgpuPod("other", "mig-0", 6, 1, 4000, 0, "gpu-mig", "GPU-m0[group1-0],NVIDIA,4000,0:", "success"),
		waiter(),
		event("team", "Pod", "waiter", 10, v1.EventTypeWarning, "FailedScheduling",
			"0/5 nodes are unavailable: 1 hamivgpu device registration on the node is invalid, 1 node(s) were unschedulable, "+
				"2 hamivgpu devices are not present on the node, 1 insufficient vGPU memory on card, 1 vGPU card unhealthy."),
		event("team", "PodGroup", "pg-waiter", 11, v1.EventTypeWarning, "Unschedulable", "1/1 tasks in gang unschedulable"),
		event("team", "Pod", "refused", 12, v1.EventTypeWarning, "VGPUAllocationFailed", "allocation names card GPU-b1 not registered"),
	}
	kube = append(kube, npuPods...)
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "pg-waiter"},
		Spec: schedulingv1beta1.PodGroupSpec{MinMember: 1},
		Status: schedulingv1beta1.PodGroupStatus{Phase: schedulingv1beta1.PodGroupInqueue, Conditions: []schedulingv1beta1.PodGroupCondition{{
			Type: schedulingv1beta1.PodGroupUnschedulableType, Status: v1.ConditionTrue, Reason: "NotEnoughResources",
			LastTransitionTime: metav1.NewTime(t0.Add(9 * time.Second)),
			Message:            "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable",
		}}}}
	return kube, []runtime.Object{pg}
}

// waiter is a pod asking for 35000 MiB, more than any A100 of gpu-a has
// free; it would fit card 3 if the notebook left.
func waiter() *v1.Pod {
	p := vgpuPod("team", "waiter", 7, 1, 35000, 0, "", "", "")
	p.Annotations[annotationGroupName] = "pg-waiter"
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable",
		LastTransitionTime: metav1.NewTime(t0.Add(10 * time.Second)),
		Message: "0/5 nodes are unavailable: 1 hamivgpu device registration on the node is invalid, 1 node(s) were unschedulable, " +
			"2 hamivgpu devices are not present on the node, 1 insufficient vGPU memory on card, 1 vGPU card unhealthy."}}
	return p
}

// ascendFixture returns an Ascend910B3 node with two chips in template
// mode and two pods whose allocations the backend itself wrote.
func ascendFixture(t *testing.T) (*v1.Node, []runtime.Object) {
	t.Helper()
	reg := `[{"id":"npu-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true},` +
		`{"id":"npu-1","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]`
	n := node("npu-0", ascendproto.KeysFor("Ascend910B3").Register, reg)
	chip, _ := config.Default().VNPUs.Chip("Ascend910B3")
	b, err := ascend.New(ascend.Options{Chip: chip})
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.NewDevices(n)
	if err != nil || d == nil {
		t.Fatalf("NewDevices: %v", err)
	}
	var out []runtime.Object
	for i, name := range []string{"npu-infer-0", "npu-infer-1"} {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name),
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(20+i) * time.Second))},
			Spec: v1.PodSpec{NodeName: "npu-0", Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{"huawei.com/Ascend910B3": resource.MustParse("1"), "huawei.com/Ascend910B3-memory": resource.MustParse("12000")}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning},
		}
		r, err := d.Allocate(p, device.PolicyBinpack)
		if err != nil {
			t.Fatalf("Allocate %s: %v", name, err)
		}
		p = device.ApplyReservation(p, r)
		p.Annotations[ascendproto.AnnotationBindPhase] = "success"
		out = append(out, p)
	}
	return n, out
}

// event returns an event about kind/name.
func event(ns, kind, name string, at int, typ, reason, msg string) *v1.Event {
	ts := metav1.NewTime(t0.Add(time.Duration(at) * time.Second))
	return &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "." + reason},
		InvolvedObject: v1.ObjectReference{Kind: kind, Namespace: ns, Name: name}, Type: typ, Reason: reason, Message: msg,
		Count: 1, LastTimestamp: ts}
}

// fakeEnv runs the plugin against fake clientsets holding the objects.
type fakeEnv struct {
	kube    *kubefake.Clientset
	volcano *vcfake.Clientset
}

func newFakeEnv(t *testing.T) *fakeEnv {
	kube, vc := fixture(t)
	return &fakeEnv{kube: kubefake.NewSimpleClientset(kube...), volcano: vcfake.NewSimpleClientset(vc...)}
}

// run runs the plugin with args and returns the exit code and output.
func (f *fakeEnv) run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Connect: func(ConnectOptions) (Clients, string, error) {
		return Clients{Kube: f.kube, Volcano: f.volcano}, "team", nil
	}})
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got), run with -update if intended:\n%s", path, diff)
	}
}
