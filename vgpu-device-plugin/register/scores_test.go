package register_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/notify"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
	"github.com/vgpushare/vshare/vgpu-device-plugin/register"
)

// TestRegistrarPublishesScoresOnce checks that the link scores and the NUMA
// nodes go out with the first registration, and that a report with nothing
// changed (a health re-check, the informer's echo) patches nothing.
func TestRegistrarPublishesScoresOnce(t *testing.T) {
	srv, err := nvmlmock.New(nvmlmock.MachinePCIeH100, nvmlmock.WithSeed("n1"))
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatal(err)
	}
	inv := nvidia.NewInventory("n1", gpus, config.Default(), nvidia.UnitMiB)
	var changed notify.Signal
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	api := &apiNode{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{}}}}
	reg, err := register.New(register.Options{
		Node: "n1", Inventory: func() *nvidia.Inventory { return inv }, Healthy: func(string) bool { return true },
		Changed: changed.C, Patcher: api, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	api.reg = reg
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Run(ctx)
	reg.ObserveNode(api.node)

	waitFor(t, "the first registration", func() bool { return api.count() == 1 })
	first := api.last()
	scores, err := vgpuproto.DecodeScores(first[vgpuproto.AnnotationHAMiScore], srv.UUIDs())
	if err != nil {
		t.Fatalf("published scores: %v", err)
	}
	// 0-1 are bridged (12 NVLinks) on one PCIe switch; 0-2 share the switch
	// only; 0-4 are on different sockets (HAMi's scale).
	for _, c := range []struct {
		a, b int
		want int32
	}{{0, 1, 1250}, {1, 0, 1250}, {0, 2, 50}, {0, 4, 10}, {6, 7, 1250}} {
		if got := scores[c.a*8+c.b]; got != c.want {
			t.Errorf("score %d->%d = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	cards, err := vgpuproto.DecodeRegister(first[vgpuproto.AnnotationRegister])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cards {
		if want := int32(i / 4); c.NUMA != want {
			t.Errorf("card %d NUMA = %d, want %d", i, c.NUMA, want)
		}
	}
	settle(t, api, 1)
	changed.Broadcast() // a report with nothing changed
	settle(t, api, 1)

	// Someone removes the scores: written again, alone with the handshake.
	api.edit(func(n *v1.Node) { delete(n.Annotations, vgpuproto.AnnotationHAMiScore) })
	waitFor(t, "the rewrite", func() bool { return api.count() == 2 })
	if got := api.last()[vgpuproto.AnnotationHAMiScore]; got != first[vgpuproto.AnnotationHAMiScore] {
		t.Errorf("rewritten scores = %q, want %q", got, first[vgpuproto.AnnotationHAMiScore])
	}
	if _, ok := api.last()[vgpuproto.AnnotationRegister]; ok {
		t.Errorf("rewrite patch %v carries the unchanged registration", api.last())
	}
}

// TestNoScoresWithoutTopology checks that cards the driver reports no
// links for publish no score annotation.
func TestNoScoresWithoutTopology(t *testing.T) {
	if s := register.EncodeScores(inventory(t, config.Default())); s != "" {
		t.Errorf("EncodeScores = %q, want nothing", s)
	}
}
