package frag

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// shareOf is a one-card request for pct percent of the card's memory and
// cores.
func shareOf(pct int32) Shape { return Shape{Nums: 1, Pct: pct, Cores: pct} }

// wholeOf is a request for n unused cards.
func wholeOf(n int32) Shape { return Shape{Nums: n, Pct: 100, Cores: 100} }

// learn observes n pods of each shape, in rounds, under fresh UIDs
// prefixed by tag, and fails unless a target has been published.
func learn(t *testing.T, w *Workload, tag string, n int, shapes ...Shape) {
	t.Helper()
	for i := 0; i < n; i++ {
		for k, s := range shapes {
			w.Observe(types.UID(tag+"-"+strconv.Itoa(k)+"-"+strconv.Itoa(i)), []Shape{s})
		}
	}
	if w.Target().Gen() == 0 {
		t.Fatal("no workload published")
	}
}

func TestWorkloadLearning(t *testing.T) {
	w := NewWorkload()
	if g := w.Target().Gen(); g != 0 || !w.Target().Empty() {
		t.Fatalf("target before any request: generation %d, empty %v; want 0, true", g, w.Target().Empty())
	}
	for i := 0; i < 2*MinRefresh; i++ {
		w.Observe("same", []Shape{shareOf(50)}) // the same pod counts once
	}
	if g := w.Target().Gen(); g != 0 {
		t.Errorf("generation after one pod seen many times = %d, want 0", g)
	}
	learn(t, w, "seen", MinRefresh, shareOf(50))
	target := w.Target()
	if len(target.classes) != 1 || target.classes[0].Pct != 50 || target.classes[0].weight != 1 {
		t.Errorf("target = %+v, want one class of 50%% with weight 1", target.classes)
	}
	gen := target.Gen()
	learn(t, w, "again", 4*refresh, shareOf(50))
	if g := w.Target().Gen(); g != gen {
		t.Errorf("generation moved from %d to %d though the mix did not change", gen, g)
	}
	learn(t, w, "whole", Window, wholeOf(2))
	target = w.Target()
	// The target follows within driftLimit of the window's mix.
	if target.Gen() == gen || target.classes[0].Nums != 2 || target.classes[0].weight < 1-driftLimit {
		t.Errorf("after the mix changed: generation %d (was %d), target %+v, want mostly the 2-card class",
			target.Gen(), gen, target.classes)
	}
}

// TestWorkloadWindow checks that the window holds the last Window
// requests: a pod whose requests all left it may count again.
func TestWorkloadWindow(t *testing.T) {
	w := NewWorkload()
	w.Observe("first", []Shape{shareOf(10), shareOf(20)})
	for i := 0; i < Window; i++ {
		w.Observe(types.UID("later-"+strconv.Itoa(i)), []Shape{wholeOf(1)})
	}
	if _, seen := w.seen["first"]; seen {
		t.Fatal("a pod whose requests left the window is still seen")
	}
	if len(w.window) != Window {
		t.Fatalf("window holds %d requests, want %d", len(w.window), Window)
	}
	w.Observe("first", []Shape{shareOf(10)})
	if n := w.seen["first"]; n != 1 {
		t.Errorf("a pod seen again after leaving the window counts %d times, want 1", n)
	}
}
