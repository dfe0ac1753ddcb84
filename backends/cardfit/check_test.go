package cardfit

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/device"
)

// Reasons of the test backend: small is resolvable by no eviction, busy by
// one.
const (
	rSmall Reason = iota + 1
	rBusy
)

func describeTest(r Reason) (string, bool) {
	if r == rSmall {
		return "card too small", false
	}
	return "card busy", true
}

// fourCards rejects card 0 as too small and cards 2 and 3 as busy; card 1
// fits and would take 10.
func fourCards(i int) (Reason, int) {
	switch i {
	case 0:
		return rSmall, 0
	case 1:
		return Fits, 10
	}
	return rBusy, 0
}

func TestFittingKeepsTheFittingCardsInOrder(t *testing.T) {
	got := Fitting([]int{7}, 4, fourCards)
	if diff := cmp.Diff([]int{7, 10}, got); diff != "" {
		t.Errorf("Fitting (-want +got):\n%s", diff)
	}
	if got := Fitting(nil, 0, fourCards); got != nil {
		t.Errorf("Fitting of no cards = %v, want nil", got)
	}
}

func TestExplainCountsEachRejectionOnce(t *testing.T) {
	reasons, fitting := Explain(4, fourCards, describeTest)
	if fitting != 1 {
		t.Errorf("fitting = %d, want 1", fitting)
	}
	st := reasons.Status()
	if diff := cmp.Diff([]string{"card busy", "card too small"}, st.Reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if st.Code != device.Unschedulable || reasons.Detail() != "card busy x2, card too small x1" {
		t.Errorf("status %v, detail %q; want Unschedulable (a busy card may free up), busy x2, too small x1", st.Code, reasons.Detail())
	}
}

func TestVerdictsNameEachCard(t *testing.T) {
	want := []device.CardVerdict{
		{Index: 0, Container: 2, InitContainer: true, Reason: "card too small"},
		{Index: 1, Container: 2, InitContainer: true},
		{Index: 2, Container: 2, InitContainer: true, Reason: "card busy", Resolvable: true},
		{Index: 3, Container: 2, InitContainer: true, Reason: "card busy", Resolvable: true},
	}
	if diff := cmp.Diff(want, Verdicts(4, fourCards, describeTest, 2, true)); diff != "" {
		t.Errorf("Verdicts (-want +got):\n%s", diff)
	}
}
