package conformance

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// checkNoOvercommit allocates a stream of random pods until the node is
// full, checking after every step that Filter and Allocate agree and that
// no usage exceeds its capacity; then reads every reservation back on a
// fresh node and releases everything in random order.
func checkNoOvercommit(tb testing.TB, s Suite, policy string, salt uint64) {
	e := newEnv(tb, s, salt)
	d := e.devices(tb)
	empty := e.snapshot(d)
	var placed []placement
	refused := 0
	for i := 0; i < s.Pods; i++ {
		pod := e.pod(tb)
		st := d.FilterNode(pod, policy)
		if !st.IsSuccess() {
			refused++
			checkRefusal(tb, e, d, pod, policy, st)
			continue
		}
		if score := d.ScoreNode(pod, policy); score < 0 || score > device.MaxScore {
			tb.Errorf("ScoreNode(%s, %s) = %v, want within [0, %d]", pod.Name, policy, score, device.MaxScore)
		}
		placed = append(placed, allocate(tb, d, pod, policy))
		checkUsage(tb, s, d, fmt.Sprintf("after allocating %s", pod.Name))
	}
	if len(placed) == 0 {
		tb.Fatalf("none of %d pods fit an empty node: Suite.Pod makes pods too large", s.Pods)
	}
	if refused == 0 {
		tb.Errorf("all %d pods fit: Suite.Pod never fills the node, so overcommit was not exercised", s.Pods)
	}

	fresh := e.devices(tb)
	for _, p := range placed {
		if err := fresh.AddResource(p.annotated()); err != nil {
			tb.Errorf("AddResource of %s carrying its reservation %v: %v", p.pod.Name, p.r.Annotations, err)
		}
	}
	same(tb, "fresh node + AddResource of every reservation vs the allocated node", e.snapshot(d), e.snapshot(fresh))
	for _, p := range placed {
		q := d.AddQueueResource(p.pod)
		if len(q) == 0 {
			tb.Errorf("AddQueueResource(%s) is empty for an allocated pod", p.pod.Name)
		}
		same(tb, "AddQueueResource after Allocate vs after AddResource", q, fresh.AddQueueResource(p.annotated()))
	}

	e.rng.Shuffle(len(placed), func(i, j int) { placed[i], placed[j] = placed[j], placed[i] })
	for _, p := range placed {
		if err := d.Release(p.pod, p.r); err != nil {
			tb.Errorf("Release(%s): %v", p.pod.Name, err)
		}
		if err := fresh.SubResource(p.annotated()); err != nil {
			tb.Errorf("SubResource(%s): %v", p.pod.Name, err)
		}
	}
	same(tb, "state after releasing every pod vs the empty node", empty, e.snapshot(d))
	same(tb, "state after subtracting every pod vs the empty node", empty, e.snapshot(fresh))
}

// checkRefusal checks a FilterNode refusal: a failure code with reasons,
// and an Allocate that fails too, leaving the state unchanged.
func checkRefusal(tb testing.TB, e *env, d device.Devices, pod *v1.Pod, policy string, st *device.Status) {
	tb.Helper()
	if st.Code != device.Unschedulable && st.Code != device.UnschedulableAndUnresolvable {
		tb.Errorf("FilterNode(%s) code %d (%s), want Unschedulable or UnschedulableAndUnresolvable",
			pod.Name, st.Code, st.Message())
	}
	if len(st.Reasons) == 0 {
		tb.Errorf("FilterNode(%s) refused the pod without a reason", pod.Name)
	}
	before := e.snapshot(d)
	if r, err := d.Allocate(pod, policy); err == nil {
		tb.Fatalf("FilterNode refused %s (%s) but Allocate succeeded with %v", pod.Name, st.Message(), r)
	}
	same(tb, "state after a failed Allocate vs before", before, e.snapshot(d))
}

// checkReleaseRestores allocates pods on a partly filled node, releases
// them and checks that the state is as before and that the same pod is
// placed identically again.
func checkReleaseRestores(tb testing.TB, s Suite, policy string, salt uint64) {
	e := newEnv(tb, s, salt)
	d, _ := e.partlyFilled(tb, policy)
	for i := 0; i < 3; i++ {
		pod := e.fitting(tb, d, policy)
		before := e.snapshot(d)
		first := allocate(tb, d, pod, policy)
		held := e.snapshot(d)
		if err := d.Release(pod, first.r); err != nil {
			tb.Fatalf("Release(%s): %v", pod.Name, err)
		}
		same(tb, "state after Allocate+Release vs before", before, e.snapshot(d))
		second := allocate(tb, d, pod, policy)
		same(tb, "reservation of the same pod allocated again", first.r.Annotations, second.r.Annotations)
		same(tb, "state after allocating the same pod again", held, e.snapshot(d))
		if err := d.Release(pod, second.r); err != nil {
			tb.Fatalf("Release(%s) again: %v", pod.Name, err)
		}
		same(tb, "state after the second Release vs before", before, e.snapshot(d))
	}
}
