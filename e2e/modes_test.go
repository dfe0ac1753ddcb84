//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
)

const (
	resGPUMemory = "volcano.sh/gpu-memory"
	resGPUNumber = "volcano.sh/gpu-number"
	annGPUIndex  = "volcano.sh/gpu-index"
	annPredTime  = "volcano.sh/predicate-time"
)

// TestGPUShareAndNumberModes restarts the scheduler with
// deviceshare.GPUSharingEnable, then with deviceshare.GPUNumberEnable, on a
// node registered the way Volcano's GPU share/number device plugin does it
// (capacity volcano.sh/gpu-number = cards, volcano.sh/gpu-memory = total
// MiB), and checks the cards each pod is given (volcano.sh/gpu-index), that
// a full node leaves the next Job Pending with the card-level reason, and
// that it runs once capacity frees.
func TestGPUShareAndNumberModes(t *testing.T) {
	const ns = "modes"
	ctx := setup(t, ns, 8*time.Minute)
	// Two nodes of 2 cards of 16000 MiB; the Jobs are pinned to the first.
	// The second only adds capacity, so that Volcano's proportion plugin
	// (which caps a queue at the cluster's total) lets the Jobs reach the
	// device predicate.
	for i, name := range []string{"gpushare-node-0", "gpushare-node-1"} {
		labels := map[string]string{"gpu-mode": "share"}
		if i > 0 {
			labels = nil
		}
		err := cluster.AddNode(ctx, name, v1.ResourceList{
			resGPUNumber: resource.MustParse("2"),
			resGPUMemory: resource.MustParse("32000"),
		}, nil, labels)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), name) })
	}
	pin := map[string]string{"gpu-mode": "share"}
	mem := func(mib string) v1.ResourceList { return v1.ResourceList{resGPUMemory: resource.MustParse(mib)} }
	num := func(n string) v1.ResourceList { return v1.ResourceList{resGPUNumber: resource.MustParse(n)} }

	t.Run("share", func(t *testing.T) {
		useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf("deviceshare.GPUSharingEnable: true")})
		// Three 6000 MiB pods: binpack puts two on one card (12000 of
		// 16000) and the third on the other.
		fill := framework.VGPUJob(ns, "share-fill", framework.VGPUTask{Name: "m", Replicas: 3, Limits: mem("6000"), NodeSelector: pin})
		mustRun(ctx, t, fill)
		got := gpuIndices(ctx, t, ns, fill.Name)
		if strings.Join(got, " ") != "0 0 1" && strings.Join(got, " ") != "0 1 1" {
			t.Errorf("share mode: gpu-index of the three 6000 MiB pods %v, want two on one card and one on the other", got)
		}
		// 11000 MiB fits no card (4000 and 10000 free): Pending, with the
		// card-level reason, although the node has 14000 MiB free in all.
		big := framework.VGPUJob(ns, "share-big", framework.VGPUTask{Name: "m", Replicas: 1, Limits: mem("11000"), NodeSelector: pin})
		waitPendingWithReason(ctx, t, big, "insufficient GPU memory on card")
		if err := cluster.DeleteJob(ctx, ns, fill.Name); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitJobRunning(ctx, ns, big.Name, time.Minute); err != nil {
			t.Fatal(err)
		}
		gpuIndices(ctx, t, ns, big.Name)
	})

	t.Run("number", func(t *testing.T) {
		useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf("deviceshare.GPUNumberEnable: true")})
		one := framework.VGPUJob(ns, "number-one", framework.VGPUTask{Name: "n", Replicas: 1, Limits: num("1"), NodeSelector: pin})
		mustRun(ctx, t, one)
		first := gpuIndices(ctx, t, ns, one.Name)
		// One card is held whole: a pod asking for two waits (the node's
		// advertised gpu-number already says so, and Volcano's own fit
		// reports it), then runs on both cards when the first Job is
		// deleted.
		two := framework.VGPUJob(ns, "number-two", framework.VGPUTask{Name: "n", Replicas: 1, Limits: num("2"), NodeSelector: pin})
		waitPendingWithReason(ctx, t, two, "Insufficient volcano.sh/gpu-number")
		if err := cluster.DeleteJob(ctx, ns, one.Name); err != nil {
			t.Fatal(err)
		}
		if err := cluster.WaitJobRunning(ctx, ns, two.Name, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := gpuIndices(ctx, t, ns, two.Name); len(got) != 1 || got[0] != "0,1" {
			t.Errorf("number mode: two-card pod gpu-index %v, want [0,1] (first pod had %v)", got, first)
		}
	})
}

// gpuIndices returns the job's pods' volcano.sh/gpu-index values, sorted,
// and checks each pod also carries volcano.sh/predicate-time.
func gpuIndices(ctx context.Context, t *testing.T, ns, job string) []string {
	t.Helper()
	pods, err := cluster.JobPods(ctx, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods {
		idx, ok := p.Annotations[annGPUIndex]
		if !ok {
			t.Errorf("pod %s on %s has no %s annotation: %v", p.Name, p.Spec.NodeName, annGPUIndex, p.Annotations)
		}
		if p.Annotations[annPredTime] == "" {
			t.Errorf("pod %s has no %s annotation", p.Name, annPredTime)
		}
		out = append(out, idx)
	}
	sort.Strings(out)
	t.Logf("job %s: gpu-index %v", job, out)
	return out
}

// waitPendingWithReason creates the job (deleted when the test ends) and
// waits until its PodGroup or a pod reports Unschedulable with reason in the
// message, checking meanwhile that none of its pods is bound.
func waitPendingWithReason(ctx context.Context, t *testing.T, job *batchv1alpha1.Job, reason string) {
	t.Helper()
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), job.Namespace, job.Name) })
	var pg, pod string
	err := cluster.Poll(ctx, time.Minute, "job "+job.Name+" unschedulable with "+reason, func(ctx context.Context) (bool, error) {
		pods, err := cluster.JobPods(ctx, job.Namespace, job.Name)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				return false, fmt.Errorf("pod %s was bound to %s although it should not fit", p.Name, p.Spec.NodeName)
			}
		}
		pg, pod = cluster.UnschedulableMessages(ctx, job.Namespace, job.Name)
		return strings.Contains(pg, reason) || strings.Contains(pod, reason), nil
	})
	if err != nil {
		t.Fatalf("%v\npodgroup: %q\npod: %q", err, pg, pod)
	}
	if pod == "" {
		pod = pg
	}
	t.Logf("job %s pending: %s", job.Name, pod)
}
