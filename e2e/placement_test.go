//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestPlacementBinpackAndSpread: four pods of a quarter card each (more pods
// than one card, fewer than the cards) are placed as the README documents.
// With deviceshare.SchedulePolicy binpack they share one card of one node;
// with a per-pod hami.io/gpu-scheduler-policy and node-scheduler-policy of
// spread (same scheduler) they take four different cards across both
// nodes; with SchedulePolicy spread the same happens without annotations.
// The device score weight is 10, as in the README's example, so that it
// outweighs the nodeorder plugin's own CPU-based scores.
func TestPlacementBinpackAndSpread(t *testing.T) {
	const ns = "placement"
	ctx := setup(t, ns, 6*time.Minute)
	quarter := framework.VGPUTask{Name: "q", Replicas: 4, VGPUs: 1, MemoryMiB: 8000, Cores: 25}

	t.Run("binpack", func(t *testing.T) {
		useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf(
			"deviceshare.VGPUEnable: true", "deviceshare.SchedulePolicy: binpack", "deviceshare.ScheduleWeight: 10")})
		cards := placeJob(ctx, t, framework.VGPUJob(ns, "pack", quarter))
		if len(cards) != 1 {
			t.Errorf("binpack: 4 quarter-card pods on %d cards %v, want all on one card", len(cards), cards)
		}

		spread := quarter
		spread.Annotations = map[string]string{"hami.io/gpu-scheduler-policy": "spread", "hami.io/node-scheduler-policy": "spread"}
		cards = placeJob(ctx, t, framework.VGPUJob(ns, "pod-spread", spread))
		checkSpread(t, "per-pod spread under a binpack scheduler", cards)
	})

	t.Run("spread", func(t *testing.T) {
		useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf(
			"deviceshare.VGPUEnable: true", "deviceshare.SchedulePolicy: spread", "deviceshare.ScheduleWeight: 10")})
		checkSpread(t, "SchedulePolicy spread", placeJob(ctx, t, framework.VGPUJob(ns, "spread", quarter)))
	})
}

// placeJob runs the job, checks every pod end to end and that no card is
// overcommitted, deletes the job, and returns how many pods went to each
// card ("node/UUID").
func placeJob(ctx context.Context, t *testing.T, job *batchv1alpha1.Job) map[string]int {
	t.Helper()
	mustRun(ctx, t, job)
	pods, err := cluster.JobPods(ctx, job.Namespace, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	cards := map[string]int{}
	for _, pod := range pods {
		checkAllocated(ctx, t, pod, "8000", "25")
		uuid := strings.SplitN(pod.Annotations[vgpuproto.AnnotationIDs], ",", 2)[0]
		cards[pod.Spec.NodeName+"/"+uuid]++
	}
	t.Logf("job %s: pods per card %v", job.Name, cards)
	checkNoOvercommit(ctx, t)
	if err := cluster.DeleteJob(ctx, job.Namespace, job.Name); err != nil {
		t.Fatal(err)
	}
	return cards
}

// checkSpread wants four different cards, two on each GPU node.
func checkSpread(t *testing.T, what string, cards map[string]int) {
	t.Helper()
	perNode := map[string]int{}
	for card, n := range cards {
		if n != 1 {
			t.Errorf("%s: %d pods share card %s, want one pod per card", what, n, card)
		}
		perNode[strings.SplitN(card, "/", 2)[0]] += n
	}
	for _, node := range gpuNodes {
		if perNode[node] != 2 {
			t.Errorf("%s: pods per node %v, want 2 on each of %v", what, perNode, gpuNodes)
			break
		}
	}
}
