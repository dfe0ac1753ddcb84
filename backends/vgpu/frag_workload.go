package vgpu

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
)

// PolicyFragment is the fragmentation-aware scheduling policy
// (deviceshare.SchedulePolicy: fragment). It places a pod where it
// destroys the least of the cards' usefulness to the workload the backend
// has recently seen (a Fragmentation Gradient Descent over the learned
// mix; see frag.go).
const PolicyFragment = device.PolicyFragment

// Workload learning: the recent requests form the target workload.
const (
	// fragWindow is how many recent container requests the mix is learned
	// from.
	fragWindow = 4096
	// fragRefresh is the most new requests between two target updates;
	// early on the target is updated after every eighth of the window seen
	// so far (at least fragMinRefresh), so it settles quickly.
	fragRefresh    = 256
	fragMinRefresh = 16
	// fragCoverage is the share of the window's requests the target keeps,
	// most frequent shapes first; the rare tail is noise.
	fragCoverage = 0.95
	// fragDrift is how far (total variation distance) the window's mix
	// must move from the published target before it replaces it: a
	// stable mix keeps one target, so scores stay comparable and
	// cacheable.
	fragDrift = 0.1
)

// fragShape is what one container asks for, as far as fragmentation goes.
type fragShape struct {
	nums, cores, pct int32
	memMiB           int64
	// cpu (milli-cores) and hostMem (MiB) are the pod's host requests.
	cpu, hostMem       int64
	useType, noUseType string
}

// fragClass is one shape of the target workload and its weight.
type fragClass struct {
	fragShape
	weight float64
}

// fragTarget is an immutable snapshot of the learned mix. gen changes
// with every snapshot.
type fragTarget struct {
	gen     uint64
	classes []fragClass
	// press is each card model's (upper-cased) pressure under classes
	// and the registered supply (frag_scarcity.go); nil when no class
	// names a model.
	press map[string]float64
}

// workload learns the request mix from a bounded window of recent pods.
// Its methods are safe for concurrent use: mu guards the window, and the
// published target is read without locks.
type workload struct {
	mu      sync.Mutex
	window  []fragShape
	owners  []types.UID
	next    int
	seen    map[types.UID]int
	pending int
	gen     uint64
	target  atomic.Pointer[fragTarget]
	// supply is every decoded node's cards by model, total their sum
	// over the nodes (registerSupply).
	supply map[string]map[string]typeSupply
	total  map[string]typeSupply
}

func newWorkload() *workload {
	w := &workload{seen: make(map[types.UID]int)}
	w.target.Store(&fragTarget{})
	return w
}

// ObserveRequest records the pod's vGPU request in the learned workload
// mix of the fragment policy. The plugin calls it for every pending pod
// it sees; a pod seen again in a later session counts once while it is in
// the window. Pods without a valid vGPU request are ignored.
func (b *Backend) ObserveRequest(pod *v1.Pod) {
	var req podRequest
	if err := b.parse(pod, "", &req); err != nil || req.empty() {
		return
	}
	b.frag.observe(cardledger.Key(pod), &req)
}

// WorkloadGeneration identifies the learned mix the fragment policy scores
// against: under that policy a node's ScoreNode is a function of its
// cards, the pod and this generation, so callers may cache scores until
// it (or the node) changes.
func (b *Backend) WorkloadGeneration() uint64 { return b.frag.target.Load().gen }

func (w *workload) observe(uid types.UID, req *podRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.seen[uid]; dup {
		return
	}
	for _, c := range req.ctrs() {
		s := fragShape{nums: c.nums, cores: c.cores, pct: c.pct, memMiB: c.memMiB,
			cpu: req.host.cpuMilli, hostMem: req.host.memMiB, useType: req.useType, noUseType: req.noUseType}
		if len(w.window) < fragWindow {
			w.window = append(w.window, s)
			w.owners = append(w.owners, uid)
		} else {
			old := w.owners[w.next]
			if w.seen[old]--; w.seen[old] <= 0 {
				delete(w.seen, old)
			}
			w.window[w.next], w.owners[w.next] = s, uid
			w.next = (w.next + 1) % fragWindow
		}
		w.seen[uid]++
		w.pending++
	}
	if w.pending >= min(fragRefresh, max(fragMinRefresh, len(w.window)/8)) {
		w.publish()
	}
}

// publish replaces the target with the window's most frequent shapes
// covering fragCoverage of it, weighted by their share of the kept ones,
// and the card models' pressures learned from the whole window
// (frag_scarcity.go). Called with mu held.
func (w *workload) publish() {
	counts := make(map[fragShape]int, 64)
	for _, s := range w.window {
		counts[s]++
	}
	classes := make([]fragClass, 0, len(counts))
	for s, n := range counts {
		classes = append(classes, fragClass{fragShape: s, weight: float64(n)})
	}
	// Frequent first; a total order on the rest keeps snapshots
	// deterministic.
	slices.SortFunc(classes, func(a, b fragClass) int {
		return cmp.Or(cmp.Compare(b.weight, a.weight), cmp.Compare(a.nums, b.nums), cmp.Compare(a.cores, b.cores),
			cmp.Compare(a.pct, b.pct), cmp.Compare(a.memMiB, b.memMiB), cmp.Compare(a.cpu, b.cpu), cmp.Compare(a.hostMem, b.hostMem), cmp.Compare(a.useType, b.useType),
			cmp.Compare(a.noUseType, b.noUseType))
	})
	var cum float64
	kept := 0
	for _, c := range classes {
		cum += c.weight
		kept++
		if cum >= fragCoverage*float64(len(w.window)) {
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
	if len(old.classes) > 0 && drift(old.classes, classes) < fragDrift {
		if pressDrift(old.press, press) < fragDrift {
			return
		}
		// The shapes hold, the named models' demand moved: keep the
		// classes, publish the pressures.
		classes = old.classes
	}
	w.gen++
	w.target.Store(&fragTarget{gen: w.gen, classes: classes, press: press})
}

// drift is the total variation distance between two targets' weights.
func drift(a, b []fragClass) float64 {
	diff := make(map[fragShape]float64, len(a)+len(b))
	for _, c := range a {
		diff[c.fragShape] += c.weight
	}
	for _, c := range b {
		diff[c.fragShape] -= c.weight
	}
	var d float64
	for _, v := range diff {
		d += math.Abs(v)
	}
	return d / 2
}
