//go:build e2e

package realnode

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestRestarts: the kubelet restarts, then the agent's pod is deleted, while
// a container holds its share: the container keeps running with its card
// and limit, the agent registers again (the DaemonSet brings a new pod),
// and new pods are admitted and served.
func TestRestarts(t *testing.T) {
	const ns = "restarts"
	ctx := setup(t, ns, 8*time.Minute)
	card := rc.Driver.Stats().Devices[0].UUID
	holder := runJob(ctx, t, ns, "holder", onCard(task("hold", 1, 4000, 0, "fill", "64"), card))["hold"]
	if got := logValue(ctx, t, holder, "refused"); got != "2" {
		t.Fatalf("holder: refused=%s, want 2", got)
	}
	id, dev := containerID(ctx, t, holder), cardOf(t, holder)
	capacity := allocatable(ctx, t, -1)
	before := checkpointed(t, holder)

	t.Run("the kubelet restarts", func(t *testing.T) {
		rc.Node.StopKubelet()
		if err := rc.Node.StartKubelet(ctx); err != nil {
			t.Fatal(err)
		}
		allocatable(ctx, t, capacity)
		served(ctx, t, ns, "after-kubelet", card)
		kept(ctx, t, holder, id, dev, 4000)
		if after := checkpointed(t, holder); !slices.Equal(after, before) {
			t.Errorf("the kubelet's checkpoint gives the holder %v after its restart, %v before", after, before)
		}
	})
	t.Run("the agent's pod is deleted", func(t *testing.T) {
		pods := rc.Kube.CoreV1().Pods(framework.ChartNamespace)
		old, ok := agentPod(ctx)
		if !ok {
			t.Fatal("no agent pod")
		}
		if err := pods.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := rc.Poll(ctx, 2*time.Minute, "a new agent pod ready", func(ctx context.Context) (bool, error) {
			p, ok := agentPod(ctx)
			return ok && p.UID != old.UID && podReady(p), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		served(ctx, t, ns, "after-agent", card)
		kept(ctx, t, holder, id, dev, 4000)
	})
}

// allocatable waits until the node's allocatable vGPU count is want (any
// non-zero count for -1) and returns it. After a kubelet restart it is 0
// until the agent registers again, and stays 0 when the kubelet drops the
// registration (kubelet 1.30 does when the agent registers twice in a row,
// kubernetes/kubernetes#121994).
func allocatable(ctx context.Context, t *testing.T, want int64) int64 {
	t.Helper()
	var got int64
	err := rc.Poll(ctx, time.Minute, "the node's allocatable "+string(framework.VGPUNumber), func(ctx context.Context) (bool, error) {
		n, err := rc.Node.Node(ctx)
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[framework.VGPUNumber]
		got = q.Value()
		return got > 0 && (want < 0 || got == want), nil
	})
	if err != nil {
		t.Fatalf("allocatable %s is %d, want %d: %v", framework.VGPUNumber, got, want, err)
	}
	return got
}

// served runs a 3000 MiB pod on the card and checks the agent served it:
// its limit holds as the driver counts.
func served(ctx context.Context, t *testing.T, ns, job, card string) {
	t.Helper()
	pod := runJob(ctx, t, ns, job, onCard(task("new", 1, 3000, 0, "fill", "64"), card))["new"]
	if got := logValue(ctx, t, pod, "refused"); got != "2" {
		t.Errorf("pod %s: refused=%s, want CUDA_ERROR_OUT_OF_MEMORY (2): its limit does not hold", pod.Name, got)
	}
	if peak := rc.Driver.GroupPeak(cardOf(t, pod), containerID(ctx, t, pod)); peak > 3000<<20 {
		t.Errorf("pod %s held %d MiB, over its 3000 MiB limit", pod.Name, peak>>20)
	}
}

// kept checks that the holder is the same container, never restarted,
// and never held more than its limit.
func kept(ctx context.Context, t *testing.T, holder v1.Pod, id string, dev int, limitMiB uint64) {
	t.Helper()
	p, err := rc.Kube.CoreV1().Pods(holder.Namespace).Get(ctx, holder.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("holder %s is %s", p.Name, p.Status.Phase)
	}
	cs := p.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || !hasID(cs, id) || cs.State.Running == nil {
		t.Errorf("holder %s: container %s, restarts %d, running %t; want %s, 0, running", p.Name, cs.ContainerID, cs.RestartCount, cs.State.Running != nil, id)
	}
	if peak := rc.Driver.GroupPeak(dev, id); peak > limitMiB<<20 || peak == 0 {
		t.Errorf("holder %s: driver peak %d MiB, want its allocation within %d MiB", p.Name, peak>>20, limitMiB)
	}
}

func hasID(cs v1.ContainerStatus, id string) bool { return cs.ContainerID == "containerd://"+id }

// checkpointed is what the kubelet's device checkpoint gives the pod's
// container, sorted.
func checkpointed(t *testing.T, pod v1.Pod) []string {
	t.Helper()
	entries, err := framework.DeviceCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if e.PodUID == string(pod.UID) {
			for _, d := range e.DeviceIDs {
				ids = append(ids, d...)
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("pod %s has no devices in the kubelet's checkpoint", pod.Name)
	}
	slices.Sort(ids)
	return ids
}

// agentPod is the chart's agent pod on the real node that is not being
// deleted (the newest, while the DaemonSet replaces one); ok is false when
// there is none.
func agentPod(ctx context.Context) (pod v1.Pod, ok bool) {
	list, err := rc.Kube.CoreV1().Pods(framework.ChartNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=node-agent"})
	if err != nil {
		return pod, false
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && (!ok || p.CreationTimestamp.After(pod.CreationTimestamp.Time)) {
			pod, ok = p, true
		}
	}
	return pod, ok
}

func podReady(p v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
