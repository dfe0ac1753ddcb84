//go:build e2e

package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestAgentPublishesTheDriversCards: the agent, on its production NVML path
// in the chart's DaemonSet pod, registers exactly the cards the fake driver
// has (UUID, memory, model, NUMA node), the real kubelet advertises their
// shares, and an Xid the driver raises on one card (79, "GPU has fallen off
// the bus") takes that card's shares away until it recovers (the chart's
// health-recovery, shortened for the test).
func TestAgentPublishesTheDriversCards(t *testing.T) {
	ctx := setup(t, "register", 3*time.Minute)
	cards := rc.Cards
	reg := registered(ctx, t)
	if len(reg) != len(cards) {
		t.Fatalf("the agent registered %d cards, the driver has %d", len(reg), len(cards))
	}
	split := reg[0].Count
	for i, d := range cards {
		c := reg[i]

		want := fmt.Sprintf("%s %d MiB NVIDIA-%s NUMA %d healthy", d.UUID, d.TotalBytes>>20, d.Name, d.NUMANode)
		got := fmt.Sprintf("%s %d MiB %s NUMA %d healthy", c.UUID, c.MemMiB, c.Type, c.NUMA)
		if got != want || !c.Healthy || c.Count != split {
			t.Errorf("card %d registered as %q (count %d), the driver has %q", i, got, c.Count, want)
		}
	}
	wantShares := int64(len(cards)) * int64(split)
	waitShares(ctx, t, wantShares)

	const card = 1
	// The agent's event set is registered once it waits for events: an
	// Xid the health policy ignores (31, a page fault in the application)
	// tells when it is listening.
	err := rc.Poll(ctx, time.Minute, "the agent listening for Xid events", func(context.Context) (bool, error) {
		n, err := rc.Driver.InjectXid(card, 31)
		return n > 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Driver.InjectXid(card, 79); err != nil {
		t.Fatal(err)
	}
	waitShares(ctx, t, wantShares-int64(split))
	if reg := registered(ctx, t); reg[card].Healthy || !reg[0].Healthy {
		t.Errorf("after Xid 79 on card %d: card 0 healthy %v, card %d healthy %v; want only card %d unhealthy", card, reg[0].Healthy, card, reg[card].Healthy, card)
	}
	waitShares(ctx, t, wantShares)
}

// registered is the real node's vGPU registration annotation, decoded.
func registered(ctx context.Context, t *testing.T) []vgpuproto.Card {
	t.Helper()
	node, err := rc.Node.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := vgpuproto.DecodeRegister(node.Annotations[vgpuproto.AnnotationRegister])
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// waitShares waits until the kubelet advertises n vGPU shares (the healthy
// devices the agent lists to it) on the real node.
func waitShares(ctx context.Context, t *testing.T, n int64) {
	t.Helper()
	err := rc.Poll(ctx, time.Minute, fmt.Sprintf("%d vGPU shares allocatable", n), func(ctx context.Context) (bool, error) {
		node, err := rc.Kube.CoreV1().Nodes().Get(ctx, rc.Node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := node.Status.Allocatable[vgpuproto.ResourceNumber]
		return q.Value() == n, fmt.Errorf("allocatable %s", q.String())
	})
	if err != nil {
		t.Fatal(err)
	}
}
