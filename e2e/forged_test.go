//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

const annSignature = "vshare.io/allocation-signature"

// TestForgedAllocationsGetNoDevices: users can write any annotation on the
// pods they create and set spec.nodeName themselves. With the allocation key
// the harness gives our scheduler and agents (as the chart does), the agent
// refuses, and gives no devices to, a pod that copies a running pod's
// allocation and signature, one that writes an unsigned allocation of a free
// card, one that names another node's allocation, and one placed by another
// scheduler; each is marked bind-phase failed. A Job whose pod template
// carries forged allocation annotations, scheduled by our scheduler, gets
// the scheduler's own allocation instead.
func TestForgedAllocationsGetNoDevices(t *testing.T) {
	const ns = "forged"
	ctx := setup(t, ns, 4*time.Minute)
	// As the real kubelet, fail a pod whose admission was refused instead
	// of retrying it: a retry is a new Allocate the agent may serve with
	// another pod's pending allocation.
	for _, n := range gpuNodes {
		k := cluster.Node(n).Kubelet
		k.SetFailPodsOnAdmissionError(true)
		t.Cleanup(func() { k.SetFailPodsOnAdmissionError(false) })
	}
	job := framework.VGPUJob(ns, "genuine", framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: 4000, Cores: 20})
	mustRun(ctx, t, job)
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil || len(pods) != 1 {
		t.Fatalf("genuine Job pods: %v, %v", pods, err)
	}
	genuine := pods[0]
	checkAllocated(ctx, t, genuine, "4000", "20")
	if genuine.Annotations[annSignature] == "" {
		t.Fatalf("pod %s was scheduled by our scheduler with an allocation key but carries no %s", genuine.Name, annSignature)
	}
	node := genuine.Spec.NodeName
	other := gpuNodes[0]
	if other == node {
		other = gpuNodes[1]
	}
	card := strings.SplitN(genuine.Annotations[vgpuproto.AnnotationIDs], ",", 2)[0]
	bindTime := strconv.FormatInt(time.Now().Unix(), 10)
	free := func(c string) string { return c + ",NVIDIA,4000,20:" }
	forged := []struct {
		name, scheduler string
		annotations     map[string]string
		wantErr         string
	}{
		{name: "copied", scheduler: "volcano", annotations: maps.Clone(genuine.Annotations),
			wantErr: "does not match the pod's UID"},
		{name: "unsigned", scheduler: "volcano", wantErr: annSignature + " is missing", annotations: map[string]string{
			vgpuproto.AnnotationIDs: free(card), vgpuproto.AnnotationToAllocate: free(card), vgpuproto.AnnotationNode: node,
			vgpuproto.AnnotationTime: bindTime, vgpuproto.AnnotationBindTime: bindTime, vgpuproto.AnnotationBindPhase: "allocating"}},
		{name: "other-node", scheduler: "volcano", wantErr: `volcano.sh/vgpu-node="` + other + `" was not written for node`, annotations: map[string]string{
			vgpuproto.AnnotationIDs: free(card), vgpuproto.AnnotationToAllocate: free(card), vgpuproto.AnnotationNode: other,
			vgpuproto.AnnotationTime: bindTime, vgpuproto.AnnotationBindTime: bindTime, vgpuproto.AnnotationBindPhase: "allocating"}},
		{name: "other-scheduler", scheduler: "default-scheduler", annotations: maps.Clone(genuine.Annotations),
			wantErr: `spec.schedulerName "default-scheduler" is not one of`},
	}
	for _, f := range forged {
		ann := f.annotations
		ann[vgpuproto.AnnotationToAllocate] = ann[vgpuproto.AnnotationIDs] // the copy's is consumed already
		ann[vgpuproto.AnnotationBindPhase] = "allocating"
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged-" + f.name, Annotations: ann},
			Spec: v1.PodSpec{
				NodeName: node, SchedulerName: f.scheduler,
				Containers: []v1.Container{{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
					framework.VGPUNumber: resource.MustParse("1"), "volcano.sh/vgpu-memory": resource.MustParse("4000"),
					"volcano.sh/vgpu-cores": resource.MustParse("20"),
				}}}},
			},
		}
		created, err := cluster.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", pod.Name, err)
		}
		t.Cleanup(func() {
			_ = cluster.Kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
		})
		checkRefused(ctx, t, cluster.Node(node), created, f.wantErr)
	}
	for _, f := range forged {
		_ = cluster.Kube.CoreV1().Pods(ns).Delete(ctx, "forged-"+f.name, metav1.DeleteOptions{})
	}

	// A pod placed by hand with no allocation at all, while a real
	// allocation is admitted on the same node: the agent cannot tell whose
	// admission a request is, so the bare pod gets nothing (and neither
	// pod is handed the other's cards).
	bare := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: "volcano", Containers: []v1.Container{{Name: "c", Image: "busybox",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{framework.VGPUNumber: resource.MustParse("1")}}}}},
	}
	if bare, err = cluster.Kube.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pinned := framework.VGPUJob(ns, "pinned", framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: 2000, Cores: 10,
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
	if err := cluster.CreateJob(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, pinned.Name) })
	checkBareGetsNothing(ctx, t, cluster.Node(node), bare, ns, pinned.Name)
	_ = cluster.DeleteJob(ctx, ns, pinned.Name)
	_ = cluster.Kube.CoreV1().Pods(ns).Delete(ctx, bare.Name, metav1.DeleteOptions{})

	// Through the scheduler: the forged values are replaced by its own.
	preset := framework.VGPUJob(ns, "preset", framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: 3000, Cores: 10,
		Annotations: map[string]string{vgpuproto.AnnotationIDs: "GPU-forged,NVIDIA,40960,100:",
			vgpuproto.AnnotationToAllocate: "GPU-forged,NVIDIA,40960,100:", vgpuproto.AnnotationNode: other,
			vgpuproto.AnnotationBindPhase: "success", annSignature: genuine.Annotations[annSignature]}})
	mustRun(ctx, t, preset)
	pods, err = cluster.JobPods(ctx, ns, preset.Name)
	if err != nil || len(pods) != 1 {
		t.Fatalf("preset Job pods: %v, %v", pods, err)
	}
	checkAllocated(ctx, t, pods[0], "3000", "10")
	if pods[0].Annotations[annSignature] == genuine.Annotations[annSignature] {
		t.Errorf("pod %s kept the forged signature", pods[0].Name)
	}
	checkNoOvercommit(ctx, t)
}

// checkRefused waits until the agent has refused the pod: bind-phase
// failed and a Warning event VGPUAllocationFailed on the pod whose message
// mentions want; every Allocate the fake kubelet made for it failed and none
// gave it devices. (The kubelet's Allocate does not name the pod, so the
// refusal's text may reach another pod's Allocate: the event is the record.)
func checkRefused(ctx context.Context, t *testing.T, node *framework.GPUNode, pod *v1.Pod, want string) {
	t.Helper()
	var msgs []string
	err := cluster.Poll(ctx, 30*time.Second, "the agent to refuse "+pod.Name, func(ctx context.Context) (bool, error) {
		alloc, ok := node.Kubelet.Allocation(pod.UID)
		if ok && len(alloc.Containers) == 1 && alloc.Containers[0].Envs != nil {
			return false, fmt.Errorf("forged pod %s got devices: %v", pod.Name, alloc.Containers[0].Envs)
		}
		got, err := cluster.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		events, err := cluster.Kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(pod.UID) + ",reason=VGPUAllocationFailed"})
		if err != nil {
			return false, err
		}
		msgs = msgs[:0]
		found := false
		for _, e := range events.Items {
			msgs = append(msgs, e.Message)
			found = found || (e.Type == v1.EventTypeWarning && strings.Contains(e.Message, want))
		}
		return found && got.Annotations[vgpuproto.AnnotationBindPhase] == "failed" && ok && alloc.Containers[0].Attempts > 0, nil
	})
	if err != nil {
		t.Errorf("forged pod %s: %v (events: %q)", pod.Name, err, msgs)
		return
	}
	// The fake kubelet retries a failed admission a few times; none may
	// succeed later.
	if alloc, _ := node.Kubelet.Allocation(pod.UID); alloc.Containers[0].Envs != nil {
		t.Errorf("forged pod %s got devices on a later attempt: %v", pod.Name, alloc.Containers[0].Envs)
	}
	t.Logf("forged pod %s refused: %s", pod.Name, strings.Join(msgs, " | "))
}

// checkBareGetsNothing waits until the bare pod's admission failed (the
// fake kubelet marks it Failed) without devices, and checks that the pinned
// Job's pod, admitted on the same node meanwhile, got either its own
// allocation or none.
func checkBareGetsNothing(ctx context.Context, t *testing.T, node *framework.GPUNode, bare *v1.Pod, ns, job string) {
	t.Helper()
	err := cluster.Poll(ctx, 90*time.Second, "the bare pod's admission to fail", func(ctx context.Context) (bool, error) {
		if alloc, ok := node.Kubelet.Allocation(bare.UID); ok && alloc.Containers[0].Envs != nil {
			return false, fmt.Errorf("bare pod got devices: %v", alloc.Containers[0].Envs)
		}
		got, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, bare.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == v1.PodFailed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	alloc, _ := node.Kubelet.Allocation(bare.UID)
	t.Logf("bare pod refused: %q", alloc.Containers[0].Errors)
	err = cluster.Poll(ctx, 60*time.Second, "the pinned pod's admission to end", func(ctx context.Context) (bool, error) {
		pods, err := cluster.JobPods(ctx, ns, job)
		if err != nil || len(pods) == 0 {
			return false, err
		}
		p := pods[0]
		a, ok := node.Kubelet.Allocation(p.UID)
		if !ok {
			return false, nil
		}
		c := a.Containers[0]
		switch {
		case c.Envs != nil:
			card := strings.SplitN(p.Annotations[vgpuproto.AnnotationIDs], ",", 2)[0]
			if got := c.Envs["NVIDIA_VISIBLE_DEVICES"]; got != card {
				return false, fmt.Errorf("pinned pod %s got %s, its allocation is %s", p.Name, got, card)
			}
			t.Logf("pinned pod %s admitted with its own card %s", p.Name, card)
			return true, nil
		case p.Status.Phase == v1.PodFailed:
			t.Logf("pinned pod %s refused while the bare pod could be in admission: %q", p.Name, c.Errors)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Error(err)
	}
}
