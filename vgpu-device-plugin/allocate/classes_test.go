package allocate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The scheduler lets pods whose entries have different card counts be
// pending on one node together (backends/vgpu AgentClasses,
// deviceshare/bind agentTurns) because the agent serves a request for n
// cards only to a pod whose next entry has n cards. Whichever order the
// kubelet admits them in, each gets its own entry: here the younger pod
// first.
func TestAllocateTellsPodsOfOtherCardCountsApart(t *testing.T) {
	e := newEnv(t)
	e.rec.apply = true
	u := e.uuids
	one := newPod("one").container("main", 1, nil).allocated(entry(u[0], 20000, 0), 100).build()
	two := newPod("two").container("main", 2, nil).allocated(entry(u[1], 20000, 0)+entry(u[2], 20000, 0), 200).build()
	e.add(t, one, two)
	ctx := context.Background()
	for _, step := range []struct {
		pod   string
		cards []string
	}{
		{"two", []string{u[1], u[2]}},
		{"one", []string{u[0]}},
	} {
		n := len(step.cards)
		if got := e.alloc.PreferredCards(ctx, preferReq(e, n)); !cmp.Equal(got, step.cards) {
			t.Errorf("admitting %s: PreferredCards(%d) = %v, want %v", step.pod, n, got, step.cards)
		}
		resp, err := e.alloc.Allocate(ctx, request(n))
		if err != nil {
			t.Fatalf("admitting %s: Allocate(%d): %v", step.pod, n, err)
		}
		c := resp.ContainerResponses[0]
		if got, want := c.Envs["NVIDIA_VISIBLE_DEVICES"], strings.Join(step.cards, ","); got != want {
			t.Errorf("admitting %s: NVIDIA_VISIBLE_DEVICES %q, want %q", step.pod, got, want)
		}
		if dir := c.Mounts[1].HostPath; !strings.HasSuffix(dir, "uid-"+step.pod+"_main") {
			t.Errorf("admitting %s: region directory %s, want the pod's own", step.pod, dir)
		}
	}
}

// Pods whose entries have the same card count are what the agent cannot
// tell apart: the kubelet's request names no pod, so admitting the younger
// one first hands it the older one's cards. This is why the scheduler
// keeps one pending pod per node and card count.
func TestAllocateCannotTellPodsOfTheSameCardCountApart(t *testing.T) {
	e := newEnv(t)
	e.rec.apply = true
	u := e.uuids
	older := newPod("older").container("main", 1, nil).allocated(entry(u[0], 20000, 0), 100).build()
	younger := newPod("younger").container("main", 1, nil).allocated(entry(u[1], 20000, 0), 200).build()
	e.add(t, older, younger)
	// The kubelet admits the younger pod first; whatever it is, the agent
	// serves the oldest entry of that size.
	resp, err := e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != u[0] {
		t.Errorf("served %s, want %s: the older pod's entry, the only choice a request for one card allows", got, u[0])
	}
}
