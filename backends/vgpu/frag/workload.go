package frag

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// Workload learning: the recent requests form the target workload.
const (
	// Window is how many recent container requests the mix is learned
	// from.
	Window = 4096
	// refresh is the most new requests between two target updates; early
	// on the target is updated after every eighth of the window seen so
	// far (at least MinRefresh), so it settles quickly.
	refresh = 256
	// MinRefresh is the fewest new requests that update the target.
	MinRefresh = 16
	// coverage is the share of the window's requests the target keeps,
	// most frequent shapes first; the rare tail is noise.
	coverage = 0.95
	// driftLimit is how far (total variation distance) the window's mix
	// must move from the published target before it replaces it: a
	// stable mix keeps one target, so scores stay comparable and
	// cacheable.
	driftLimit = 0.1
)

// Shape is what one container asks for, as far as fragmentation goes.
type Shape struct {
	// Nums cards, each with MemMiB of memory or else Pct percent of the
	// card's, and Cores percent of its SMs.
	Nums, Cores, Pct int32
	MemMiB           int64
	// CPU (milli-cores) and HostMem (MiB) are the pod's host requests.
	CPU, HostMem int64
	// UseType and NoUseType are the pod's upper-cased type selectors.
	UseType, NoUseType string
}

// memOn returns the memory the shape takes on a card of total MiB, as the
// card check computes it.
func (s *Shape) memOn(total int64) int64 {
	if s.MemMiB > 0 {
		return s.MemMiB
	}
	return total * int64(s.Pct) / 100
}

// class is one shape of the target workload and its weight.
type class struct {
	Shape
	weight float64
}

// Target is an immutable snapshot of the learned mix.
type Target struct {
	gen     uint64
	classes []class
	// press is each card model's (upper-cased) pressure under classes
	// and the registered supply (scarcity.go); nil when no class names a
	// model.
	press map[string]float64
}

// Gen identifies the snapshot: it changes with every one published.
func (t *Target) Gen() uint64 { return t.gen }

// Empty reports whether the target has no class: nothing learned yet,
// nothing to measure.
func (t *Target) Empty() bool { return len(t.classes) == 0 }

// Workload learns the request mix from a bounded window of recent pods.
// Its methods are safe for concurrent use: mu guards the window, and the
// published target is read without locks.
type Workload struct {
	mu      sync.Mutex
	window  []Shape
	owners  []types.UID
	next    int
	seen    map[types.UID]int
	pending int
	gen     uint64
	target  atomic.Pointer[Target]
	// supply is every decoded node's cards by model, total their sum
	// over the nodes (RegisterSupply).
	supply map[string]map[string]Supply
	total  map[string]Supply
}

// NewWorkload returns a Workload that has learned nothing: its target is
// empty, at generation 0.
func NewWorkload() *Workload {
	w := &Workload{seen: make(map[types.UID]int)}
	w.target.Store(&Target{})
	return w
}

// Target is the latest published target.
func (w *Workload) Target() *Target { return w.target.Load() }

// Observe records the shapes of a pod's containers asking for cards. A
// pod (uid) seen again counts once while it is in the window.
func (w *Workload) Observe(uid types.UID, shapes []Shape) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.seen[uid]; dup {
		return
	}
	for _, s := range shapes {
		if len(w.window) < Window {
			w.window = append(w.window, s)
			w.owners = append(w.owners, uid)
		} else {
			old := w.owners[w.next]
			if w.seen[old]--; w.seen[old] <= 0 {
				delete(w.seen, old)
			}
			w.window[w.next], w.owners[w.next] = s, uid
			w.next = (w.next + 1) % Window
		}
		w.seen[uid]++
		w.pending++
	}
	if w.pending >= min(refresh, max(MinRefresh, len(w.window)/8)) {
		w.publish()
	}
}

// publish replaces the target with the window's most frequent shapes
// covering coverage of it, weighted by their share of the kept ones,
// and the card models' pressures learned from the whole window
// (scarcity.go). Called with mu held.
func (w *Workload) publish() {
	counts := make(map[Shape]int, 64)
	for _, s := range w.window {
		counts[s]++
	}
	classes := make([]class, 0, len(counts))
	for s, n := range counts {
		classes = append(classes, class{Shape: s, weight: float64(n)})
	}
	// Frequent first; a total order on the rest keeps snapshots
	// deterministic.
	slices.SortFunc(classes, func(a, b class) int {
		return cmp.Or(cmp.Compare(b.weight, a.weight), cmp.Compare(a.Nums, b.Nums), cmp.Compare(a.Cores, b.Cores),
			cmp.Compare(a.Pct, b.Pct), cmp.Compare(a.MemMiB, b.MemMiB), cmp.Compare(a.CPU, b.CPU), cmp.Compare(a.HostMem, b.HostMem), cmp.Compare(a.UseType, b.UseType),
			cmp.Compare(a.NoUseType, b.NoUseType))
	})
	var cum float64
	kept := 0
	for _, c := range classes {
		cum += c.weight
		kept++
		if cum >= coverage*float64(len(w.window)) {
			break
		}
	}
	// The pressures see the whole window: the pods that name a scarce
	// model are often too few to be among the frequent shapes.
	press := w.pressure(classes)
	classes = classes[:kept]
	for i := range classes {
		classes[i].weight /= cum
	}
	w.pending = 0
	old := w.target.Load()
	if len(old.classes) > 0 && drift(old.classes, classes) < driftLimit {
		if pressDrift(old.press, press) < driftLimit {
			return
		}
		// The shapes hold, the named models' demand moved: keep the
		// classes, publish the pressures.
		classes = old.classes
	}
	w.gen++
	w.target.Store(&Target{gen: w.gen, classes: classes, press: press})
}

// drift is the total variation distance between two targets' weights.
func drift(a, b []class) float64 {
	diff := make(map[Shape]float64, len(a)+len(b))
	for _, c := range a {
		diff[c.Shape] += c.weight
	}
	for _, c := range b {
		diff[c.Shape] -= c.weight
	}
	var d float64
	for _, v := range diff {
		d += math.Abs(v)
	}
	return d / 2
}
