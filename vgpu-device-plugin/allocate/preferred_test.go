package allocate_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// preferReq is the kubelet's request for size devices among every virtual
// device of the node (10 per card).
func preferReq(e *env, size int) *pluginapi.ContainerPreferredAllocationRequest {
	var avail []string
	for _, u := range e.uuids {
		for i := 0; i < 10; i++ {
			avail = append(avail, deviceplugin.VirtualDeviceID(u, i))
		}
	}
	return &pluginapi.ContainerPreferredAllocationRequest{AvailableDeviceIDs: avail, AllocationSize: int32(size)}
}

func TestPreferredCardsFollowTheAllocation(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	ids := entry(u[7], 4000, 30) + entry(u[6], 4000, 30) + ";;" + entry(u[5], 2000, 0)
	e.add(t, newPod("train").
		container("main", 2, map[string]int64{"volcano.sh/vgpu-memory": 4000, "volcano.sh/vgpu-cores": 30}).
		container("sidecar", 0, nil).
		container("eval", 1, map[string]int64{"volcano.sh/vgpu-memory": 2000}).
		allocated(ids, 100).build())
	ctx := context.Background()

	if got := e.alloc.PreferredCards(ctx, preferReq(e, 2)); !cmp.Equal(got, []string{u[7], u[6]}) {
		t.Errorf("first container: PreferredCards = %v, want the scheduler's cards %v", got, []string{u[7], u[6]})
	}
	if got := e.alloc.PreferredCards(ctx, preferReq(e, 3)); got != nil {
		t.Errorf("a size no pending entry has: PreferredCards = %v, want none", got)
	}
	if calls := e.rec.Calls(); len(calls) != 0 {
		t.Errorf("PreferredCards wrote %v; it must only look", calls)
	}
	if _, err := e.alloc.Allocate(ctx, request(2)); err != nil {
		t.Fatal(err)
	}
	// The informer has not seen Allocate's write: the agent's own record of
	// it moves the preference to the next container, as Allocate does.
	if got := e.alloc.PreferredCards(ctx, preferReq(e, 1)); !cmp.Equal(got, []string{u[5]}) {
		t.Errorf("second container: PreferredCards = %v, want %v", got, []string{u[5]})
	}
}

func TestPreferredCardsOldestPodFirst(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	e.add(t,
		newPod("young").container("c", 1, nil).allocated(entry(u[1], 1000, 0), 200).build(),
		newPod("old").container("c", 1, nil).allocated(entry(u[2], 1000, 0), 100).build())
	if got := e.alloc.PreferredCards(context.Background(), preferReq(e, 1)); !cmp.Equal(got, []string{u[2]}) {
		t.Errorf("PreferredCards = %v, want the oldest pod's card %v", got, u[2])
	}
}

// TestPreferredCardsRefusedPodOnlyLooked: a pod Allocate would refuse (its
// allocation names another node) gives no preference and is not marked
// failed by the look; Allocate refuses it.
func TestPreferredCardsRefusedPodOnlyLooked(t *testing.T) {
	e := newEnv(t)
	e.add(t, newPod("forged").container("c", 1, nil).allocated(entry(e.uuids[3], 1000, 0), 100).
		annotate(vgpuproto.AnnotationNode, "other-node").build())
	if got := e.alloc.PreferredCards(context.Background(), preferReq(e, 1)); got != nil {
		t.Errorf("PreferredCards = %v, want none", got)
	}
	if calls := e.rec.Calls(); len(calls) != 0 {
		t.Errorf("PreferredCards wrote %v; it must only look", calls)
	}
	if got := e.alloc.PreferredCards(context.Background(), preferReq(e, 0)); got != nil {
		t.Errorf("size 0: PreferredCards = %v, want none", got)
	}
}

// TestPreferredAllocationThroughThePlugin: the kit turns the agent's cards
// into device IDs of those cards.
func TestPreferredAllocationThroughThePlugin(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	e.add(t, newPod("p").container("c", 2, nil).allocated(entry(u[4], 1000, 0)+entry(u[0], 1000, 0), 100).build())
	req := preferReq(e, 2)
	got := deviceplugin.PreferByCard(req.AvailableDeviceIDs, nil, 2, e.alloc.PreferredCards(context.Background(), req))
	want := []string{deviceplugin.VirtualDeviceID(u[4], 0), deviceplugin.VirtualDeviceID(u[0], 0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("preferred device IDs (-want +got):\n%s", diff)
	}
}
