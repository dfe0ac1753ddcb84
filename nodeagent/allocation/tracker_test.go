package allocation_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

var protocol = allocation.Protocol{ToAllocate: "x/to-allocate", BindPhase: "x/bind-phase", Node: "x/node",
	Allocating: "allocating", Success: "success", Failed: "failed"}

// recorder records the writes; fail makes the next pod patch fail.
type recorder struct {
	patches  []map[string]string
	released []string
	fail     error
}

func (r *recorder) PatchPodAnnotations(_ context.Context, _ *v1.Pod, ann map[string]string) error {
	if err := r.fail; err != nil {
		r.fail = nil
		return err
	}
	r.patches = append(r.patches, maps.Clone(ann))
	return nil
}

func (r *recorder) ReleaseNodeLock(_ context.Context, pod *v1.Pod) error {
	r.released = append(r.released, pod.Name)
	return nil
}

func pod(name, node, toAllocate, phase string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{protocol.Node: node, protocol.ToAllocate: toAllocate, protocol.BindPhase: phase}}}
}

// TestTrackerRemembersWritesUntilTheInformerShowsThem serves a pod's two
// containers while the informer still shows the pod as scheduled, then
// catches the informer up.
func TestTrackerRemembersWritesUntilTheInformerShowsThem(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	rec := &recorder{}
	tr := allocation.NewTracker(allocation.TrackerOptions{Node: "n1", Protocol: protocol, Patcher: rec, Kind: "test",
		StaleAfter: time.Minute, Clock: clk})
	ctx := context.Background()
	p := pod("p", "n1", "a;b", "allocating")

	if err := tr.Served(ctx, p, "c0", ";b", false); err != nil {
		t.Fatal(err)
	}
	if got, phase := tr.View(p, clk.Now()); got != ";b" || phase != "allocating" {
		t.Errorf("View after the first container = %q, %q; want what was written", got, phase)
	}
	if err := tr.Served(ctx, p, "c1", ";", true); err != nil {
		t.Fatal(err)
	}
	if got, phase := tr.View(p, clk.Now()); got != ";" || phase != "success" {
		t.Errorf("View after the last container = %q, %q; want it done", got, phase)
	}
	want := []map[string]string{{protocol.ToAllocate: ";b"}, {protocol.ToAllocate: ";", protocol.BindPhase: "success"}}
	if diff := cmp.Diff(want, rec.patches); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p"}, rec.released); diff != "" {
		t.Errorf("node locks released (-want +got):\n%s", diff)
	}
	caught := pod("p", "n1", ";", "success")
	if got, phase := tr.View(caught, clk.Now()); got != ";" || phase != "success" {
		t.Errorf("View once the informer caught up = %q, %q", got, phase)
	}
	// Forgotten once shown: a later change by someone else is seen.
	if got, _ := tr.View(pod("p", "n1", "c", "allocating"), clk.Now()); got != "c" {
		t.Errorf("View after the informer caught up = %q, want the pod's own value", got)
	}
}

func TestTrackerFail(t *testing.T) {
	tests := []struct {
		name         string
		node         string
		patchErr     error
		wantPatches  int
		wantReleased []string
	}{
		{name: "written for this node: lock released", node: "n1", wantPatches: 1, wantReleased: []string{"p"}},
		{name: "written for another node: lock kept", node: "n2", wantPatches: 1},
		{name: "recording the container fails", node: "n1", patchErr: errors.New("conflict"), wantPatches: 1, wantReleased: []string{"p"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			rec := &recorder{}
			tr := allocation.NewTracker(allocation.TrackerOptions{Node: "n1", Protocol: protocol, Patcher: rec, Kind: "test",
				StaleAfter: time.Minute, Clock: clk})
			p := pod("p", tc.node, "a", "allocating")
			if tc.patchErr != nil {
				rec.fail = tc.patchErr
				if err := tr.Served(context.Background(), p, "c0", ";", true); !errors.Is(err, tc.patchErr) {
					t.Fatalf("Served = %v, want the patch error", err)
				}
			} else {
				tr.Fail(context.Background(), p, errors.New("refused"))
			}
			if len(rec.patches) != tc.wantPatches || rec.patches[0][protocol.BindPhase] != "failed" {
				t.Errorf("patches %v, want bind-phase failed", rec.patches)
			}
			if diff := cmp.Diff(tc.wantReleased, rec.released); diff != "" {
				t.Errorf("node locks released (-want +got):\n%s", diff)
			}
			if !tr.Failed(p.UID) {
				t.Error("Failed = false after the allocation failed")
			}
			if _, phase := tr.View(p, clk.Now()); phase != "failed" {
				t.Errorf("View phase = %q before the informer shows it, want failed", phase)
			}
			clk.SetTime(clk.Now().Add(2 * time.Minute))
			tr.Expire(clk.Now())
			if tr.Failed(p.UID) {
				t.Error("Failed = true after StaleAfter")
			}
		})
	}
}

func TestBindTime(t *testing.T) {
	now := time.Unix(10_000, 0)
	tests := []struct {
		value   string
		wantErr error
	}{
		{value: strconv.FormatInt(now.Unix()-60, 10)},
		{value: strconv.FormatInt(now.Unix()-301, 10), wantErr: allocation.ErrStale},
		{value: "yesterday", wantErr: allocation.ErrForged},
		{value: "", wantErr: allocation.ErrForged},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			p := pod("p", "n1", "", "")
			p.Annotations["x/bind-time"] = tc.value
			got, err := allocation.BindTime(p, "x/bind-time", now, 5*time.Minute)
			if !errors.Is(err, tc.wantErr) || (err == nil && strconv.FormatInt(got, 10) != tc.value) {
				t.Errorf("BindTime(%q) = %d, %v; want error %v", tc.value, got, err, tc.wantErr)
			}
		})
	}
}

func TestWaitStopsWhenFoundOrTold(t *testing.T) {
	ctx := context.Background()
	calls := 0
	got, err := allocation.Wait(ctx, time.Minute, func() (int, bool, error) {
		calls++
		if calls < 3 {
			return 0, false, errors.New("not yet")
		}
		return 7, false, nil
	})
	if got != 7 || err != nil || calls != 3 {
		t.Errorf("Wait = %d, %v after %d calls; want 7 found on the third", got, err, calls)
	}
	calls = 0
	_, err = allocation.Wait(ctx, time.Minute, func() (int, bool, error) { calls++; return 0, true, errors.New("refused") })
	if err == nil || calls != 1 {
		t.Errorf("Wait told to stop: %v after %d calls, want the error at once", err, calls)
	}
	_, err = allocation.Wait(ctx, 0, func() (int, bool, error) { return 0, false, errors.New("none") })
	if err == nil {
		t.Error("Wait without time to wait found something")
	}
}
