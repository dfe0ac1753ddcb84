package deviceshare

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// Notes nobody claims (a pipelined task is never bound) are dropped once
// they are older than intentTTL; fresh ones stay.
func TestBinderDropsUnclaimedNotes(t *testing.T) {
	clk := testingclock.NewFakeClock(testTime)
	st := NewState(Options{Clock: clk})
	defer st.Close()
	b := st.binder
	b.annotate("stale", "n1", map[string]string{"k": "v"}, nil, nil)
	clk.Step(intentTTL + time.Second)
	b.annotate("fresh", "n1", map[string]string{"k": "v"}, nil, nil)
	if n := b.take("other"); n != nil {
		t.Fatalf("take of an unknown task = %+v, want nil", n)
	}
	if b.annotationsFor("stale") != nil {
		t.Error("a note older than intentTTL was kept")
	}
	if b.annotationsFor(vcapi.TaskID("fresh")) == nil {
		t.Error("a fresh note was dropped")
	}
	if n := b.take("fresh"); n == nil || n.annotations["k"] != "v" {
		t.Errorf("take(fresh) = %+v, want its note", n)
	}
}
