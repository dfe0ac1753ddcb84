package allocation_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

var journalProto = allocation.Protocol{
	ToAllocate: "example.com/to-allocate", BindPhase: "example.com/bind-phase", Node: "example.com/node",
	Allocating: "allocating", Success: "success", Failed: "failed",
}

func phasePod(name, phase string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
		Annotations: map[string]string{journalProto.BindPhase: phase}}}
}

// newListedJournal returns a journal whose informer listed the node's pods
// longer than the horizon ago.
func newListedJournal(t *testing.T) (*allocation.Journal, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := allocation.NewJournal(journalProto, time.Minute, clk)
	j.Listed()
	clk.Step(time.Minute + time.Second)
	return j, clk
}

func allowed(j *allocation.Journal, m allocation.Mark) ([]string, bool) {
	uids, closed := j.Allowed(m)
	var names []string
	for uid := range uids {
		names = append(names, string(uid))
	}
	slices.Sort(names)
	return names, closed
}

// A journal vouches for nothing until the informer has listed, nor within
// the horizon of a list: a list may hide a pod bound and deleted between
// two watches.
func TestJournalRefusesMarksNearAList(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := allocation.NewJournal(journalProto, time.Minute, clk)
	if _, ok := j.Mark(); ok {
		t.Fatal("Mark before the informer listed: ok, want refused")
	}
	j.Listed()
	clk.Step(30 * time.Second)
	if _, ok := j.Mark(); ok {
		t.Fatal("Mark 30s after a list (horizon 1m): ok, want refused")
	}
	clk.Step(31 * time.Second)
	if _, ok := j.Mark(); !ok {
		t.Fatal("Mark 61s after a list: refused, want ok")
	}
	// A deletion learnt of by listing again is a list.
	j.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: phasePod("x", "success")})
	if _, ok := j.Mark(); ok {
		t.Fatal("Mark right after a DeletedFinalStateUnknown: ok, want refused")
	}
}

// The pods that reach the informer after the mark are allowed until the
// first of them leaves allocating phase; a pod entering after that (the
// scheduler's next pod, bound once the first was deleted) is not.
func TestJournalCutsAtTheFirstDepartureAfterTheMark(t *testing.T) {
	j, _ := newListedJournal(t)
	j.OnAdd(phasePod("before", "allocating"), false)
	m, ok := j.Mark()
	if !ok {
		t.Fatal("Mark refused")
	}
	if got, closed := allowed(j, m); !cmp.Equal(got, []string{"before"}) || closed {
		t.Fatalf("at the mark: allowed %v closed %v, want [before] open", got, closed)
	}
	a := phasePod("a", "allocating")
	j.OnAdd(a, false)
	j.OnAdd(phasePod("c", "allocating"), false)
	if got, closed := allowed(j, m); !cmp.Equal(got, []string{"a", "before", "c"}) || closed {
		t.Fatalf("after a and c: allowed %v closed %v, want [a before c] open", got, closed)
	}
	gone := a.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{}
	j.OnUpdate(a, gone)
	j.OnDelete(gone)
	j.OnAdd(phasePod("b", "allocating"), false)
	if got, closed := allowed(j, m); !cmp.Equal(got, []string{"before", "c"}) || !closed {
		t.Fatalf("after a left and b came: allowed %v closed %v, want [before c] closed", got, closed)
	}
	// A later mark sees b as pending.
	if _, ok := j.Mark(); ok {
		t.Fatal("Mark right after a pending pod was deleted: ok, want refused")
	}
}

// A pod that left allocating phase other than by being served may be the
// pod a request is for, with its successor already bound: within the
// horizon, the journal refuses to mark. Served pods do not count.
func TestJournalRefusesMarksAfterAPendingPodLeft(t *testing.T) {
	for _, tc := range []struct {
		name, phase string
		deleted     bool
		wantOK      bool
	}{
		{name: "served", phase: "success", wantOK: true},
		{name: "refused", phase: "failed"},
		{name: "deleted", phase: "allocating", deleted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, clk := newListedJournal(t)
			p := phasePod("p", "allocating")
			j.OnAdd(p, false)
			if tc.deleted {
				j.OnDelete(p)
			} else {
				j.OnUpdate(p, phasePod("p", tc.phase))
			}
			if _, ok := j.Mark(); ok != tc.wantOK {
				t.Fatalf("Mark ok = %v, want %v", ok, tc.wantOK)
			}
			clk.Step(time.Minute + time.Second)
			if _, ok := j.Mark(); !ok {
				t.Fatal("Mark past the horizon refused, want ok")
			}
		})
	}
}

// Terminal pods and pods being deleted are not pending.
func TestJournalPendingIsAllocatingAndLive(t *testing.T) {
	j, _ := newListedJournal(t)
	m, _ := j.Mark()
	done := phasePod("done", "allocating")
	done.Status.Phase = v1.PodFailed
	deleting := phasePod("deleting", "allocating")
	deleting.DeletionTimestamp = &metav1.Time{}
	j.OnAdd(done, false)
	j.OnAdd(deleting, false)
	j.OnAdd(phasePod("other", ""), false)
	j.OnAdd(phasePod("live", "allocating"), false)
	if got, closed := allowed(j, m); !cmp.Equal(got, []string{"live"}) || closed {
		t.Fatalf("allowed %v closed %v, want [live] open", got, closed)
	}
}

// A list made while a request waits may bring a pod bound after the
// request's own pod was bound and deleted between two watches: the pods it
// brings are not allowed to that request; those pending before stay.
func TestJournalCutsAMarkAtALaterList(t *testing.T) {
	j, _ := newListedJournal(t)
	m, ok := j.Mark()
	if !ok {
		t.Fatal("Mark refused")
	}
	j.OnAdd(phasePod("a", "allocating"), false)
	j.Listed()
	j.OnAdd(phasePod("b", "allocating"), false)
	if got, closed := allowed(j, m); !cmp.Equal(got, []string{"a"}) || !closed {
		t.Fatalf("after a list brought b: allowed %v closed %v, want [a] closed", got, closed)
	}
}

// With Protocol.Serves (agents of several device types sharing the
// bind-phase), a pod is pending while it still names this agent's devices;
// when the agent serves its part and the pod stays allocating for another
// type, it left by being served: the journal keeps vouching, as after a
// pod served to success. A pod that never named this agent's devices is
// not pending at all.
func TestJournalWithServesCountsAPartServedAsServed(t *testing.T) {
	proto := journalProto
	proto.Serves = func(p *v1.Pod) bool { return p.Annotations[proto.ToAllocate] != "" }
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	j := allocation.NewJournal(proto, time.Minute, clk)
	j.Listed()
	clk.Step(time.Minute + time.Second)
	mine := phasePod("mine", "allocating")
	mine.Annotations[proto.ToAllocate] = "card-0"
	other := phasePod("other", "allocating") // another type's pod
	j.OnAdd(mine, false)
	j.OnAdd(other, false)
	m, ok := j.Mark()
	if !ok {
		t.Fatal("Mark: refused, want ok")
	}
	if got, _ := allowed(j, m); !cmp.Equal(got, []string{"mine"}) {
		t.Errorf("allowed %v, want [mine]: other names no device of this agent", got)
	}
	served := mine.DeepCopy()
	served.Annotations[proto.ToAllocate] = ""
	j.OnUpdate(mine, served)
	if _, ok := j.Mark(); !ok {
		t.Error("Mark after this agent served its part of a pod: refused, want ok (it left by being served)")
	}
	// A pending pod deleted is not served: the journal stops vouching.
	again := phasePod("again", "allocating")
	again.Annotations[proto.ToAllocate] = "card-1"
	j.OnAdd(again, false)
	j.OnDelete(again)
	if _, ok := j.Mark(); ok {
		t.Error("Mark right after a pending pod was deleted: ok, want refused")
	}
}
