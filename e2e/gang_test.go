//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// cardsPerNode is what go-nvml's dgxa100 mock has: 8 x A100-SXM4-40GB.
const (
	cardsPerNode = 8
	cardMiB      = 40960
)

// fillMiB leaves 10960 MiB free on each card: one filler pod per card.
const fillMiB = 30000

// TestGangWaitsForCardThenRuns: with every card holding 30000 MiB, a gang
// asking 20000 MiB per pod fits on no card: it stays Pending and the reason
// users see names the card-level cause; deleting the filler lets it run.
func TestGangWaitsForCardThenRuns(t *testing.T) {
	const ns = "gang-waits"
	ctx := setup(t, ns, 4*time.Minute)
	cards := len(gpuNodes) * cardsPerNode
	filler := framework.VGPUJob(ns, "filler", framework.VGPUTask{Name: "f", Replicas: int32(cards), VGPUs: 1, MemoryMiB: fillMiB})
	mustRun(ctx, t, filler)
	checkNoOvercommit(ctx, t)

	gang := framework.VGPUJob(ns, "gang", framework.VGPUTask{Name: "g", Replicas: 2, VGPUs: 1, MemoryMiB: 20000})
	if err := cluster.CreateJob(ctx, gang); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, gang.Name) })

	var pgMsg, podMsg string
	err := cluster.Poll(ctx, time.Minute, "gang Unschedulable with a vGPU reason", func(ctx context.Context) (bool, error) {
		pgMsg, podMsg = cluster.UnschedulableMessages(ctx, ns, gang.Name)
		return strings.Contains(pgMsg+podMsg, "insufficient vGPU memory on card"), fmt.Errorf("podgroup %q, pod %q", pgMsg, podMsg)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("while blocked: PodGroup condition %q; pod PodScheduled %q", pgMsg, podMsg)
	if !strings.Contains(pgMsg, "insufficient vGPU memory on card") {
		t.Errorf("PodGroup Unschedulable condition %q does not name the card-level reason (pods say %q)", pgMsg, podMsg)
	}
	pods, err := cluster.JobPods(ctx, ns, gang.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("gang pod %s bound to %s while the gang cannot fit", p.Name, p.Spec.NodeName)
		}
	}

	if err := cluster.DeleteJob(ctx, ns, filler.Name); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitJobRunning(ctx, ns, gang.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err = cluster.JobPods(ctx, ns, gang.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		checkAllocated(ctx, t, p, "20000", "0")
	}
	checkNoOvercommit(ctx, t)
}

// mustRun creates the job, deletes it when the test ends and waits until it
// runs.
func mustRun(ctx context.Context, t *testing.T, j *batchv1alpha1.Job) {
	t.Helper()
	if err := cluster.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), j.Namespace, j.Name) })
	if err := cluster.WaitJobRunning(ctx, j.Namespace, j.Name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// checkNoOvercommit fails the test if any card holds more memory or cores
// than it has, or more holders than its share count.
func checkNoOvercommit(ctx context.Context, t *testing.T) {
	t.Helper()
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		mem, cores := 0, 0
		for _, h := range c.Holders {
			mem += h.MemoryMiB
			cores += h.Cores
		}
		if mem > c.MemoryMiB || cores > 100 || len(c.Holders) > c.Shares {
			t.Errorf("card %s on %s overcommitted: %d/%d MiB, %d%% cores, %d/%d holders: %+v",
				c.UUID, c.Node, mem, c.MemoryMiB, cores, len(c.Holders), c.Shares, c.Holders)
		}
	}
}
