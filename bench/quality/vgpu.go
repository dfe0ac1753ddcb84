package quality

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Our policies, run through the vGPU backend.
const (
	PolicyBinpack  = device.PolicyBinpack
	PolicySpread   = device.PolicySpread
	PolicyFragment = vgpu.PolicyFragment
)

// OurPolicies returns the policies placed through the vGPU backend, under
// the names deviceshare.SchedulePolicy takes.
func OurPolicies() []string { return []string{PolicyFragment, PolicyBinpack, PolicySpread} }

// cardMemMiB is the memory a model's cards register (about what NVML
// reports for the public models; G2, G3 and unknown models, which are
// Alibaba-internal names, get 16 GiB). Shares ask for a percentage of the
// card, so only rounding depends on it.
func cardMemMiB(model string) int64 {
	switch model {
	case "T4":
		return 15360
	case "V100M32":
		return 32768
	case "A10":
		return 23028
	default:
		return 16384
	}
}

// splitCount is the most pods one card may be shared by, set high enough
// (nvidia.deviceSplitCount on the node agent) that it never binds before
// the card's cores do: the trace's smallest share is 1% of a card.
const splitCount = 100

// observer is implemented by backends that learn the workload from the
// requests they see (the fragment policy).
type observer interface {
	ObserveRequest(pod *v1.Pod)
	WorkloadGeneration() uint64
}

// fixedClock stamps every allocation with the same time.
type fixedClock struct{}

func (fixedClock) Now() time.Time                  { return time.Unix(1700000000, 0) }
func (fixedClock) Since(t time.Time) time.Duration { return time.Unix(1700000000, 0).Sub(t) }

// PolicyFragmentGPUOnly is an ablation, not a policy users can pick: the
// fragment policy with pods without vGPUs left unscored (every node the
// same), as the plugin placed them before it scored them
// (docs/quality.md, "One code path"). It is not among OurPolicies.
const PolicyFragmentGPUOnly = "fragment-gpu-only"

func ours(name string) Factory {
	if name == PolicyFragmentGPUOnly {
		return func(env Env) (Policy, error) {
			v, err := newVGPUPolicy(env.Trace, PolicyFragment)
			if v != nil {
				v.gpuOnly = true
			}
			return v, err
		}
	}
	for _, p := range OurPolicies() {
		if p == name {
			return func(env Env) (Policy, error) { return newVGPUPolicy(env.Trace, name) }
		}
	}
	return nil
}

// vgpuPolicy places pods through the vGPU backend's FilterNode, ScoreNode
// and Allocate; the simulator checks CPU and memory.
type vgpuPolicy struct {
	policy  string
	backend *vgpu.Backend
	obs     observer
	devs    []device.Devices
	// memo caches FilterNode and ScoreNode per node and pod shape: both
	// are pure functions of the node's cards, the pod's request and (for
	// the fragment policy) the learned workload's generation.
	memo shapeMemo
	seq  int
	// gpuOnly leaves pods without vGPUs unscored (PolicyFragmentGPUOnly).
	gpuOnly bool
}

type shapeKey struct {
	cpu, mem, milli int64
	num             int
	spec            string
}

type vgpuMemo struct {
	valid        bool
	version, gen uint64
	fits         bool
	score        float64
}

// shapeMemo caches a policy's filter and score of each node per pod shape,
// valid while the node's Version and the policy's generation are
// unchanged (the vGPU backend's and Volcano's built-in policies).
type shapeMemo struct {
	memo   [][]vgpuMemo
	shapes map[shapeKey]int
}

func newShapeMemo(nodes int) shapeMemo {
	return shapeMemo{memo: make([][]vgpuMemo, nodes), shapes: map[shapeKey]int{}}
}

// best returns the node with the best score (Cluster.Better) among those
// with CPU and memory for p that fit it, or -1. filterScore says whether
// node n fits p and its score; it is asked only when node n's entry for
// p's shape is older than the node's Version or than gen.
func (sm *shapeMemo) best(c *Cluster, p *Pod, gen uint64, filterScore func(n int) (bool, float64)) int {
	key := shapeKey{cpu: p.CPU, mem: p.Memory, milli: p.Milli, num: p.NumGPU, spec: strings.Join(p.Spec, ",")}
	id, found := sm.shapes[key]
	if !found {
		id = len(sm.shapes)
		sm.shapes[key] = id
	}
	best, bestScore := -1, 0.0
	for n := range c.Nodes {
		s := &c.Nodes[n]
		if s.CPU < p.CPU || s.Memory < p.Memory {
			continue
		}
		if id >= len(sm.memo[n]) {
			sm.memo[n] = append(sm.memo[n], make([]vgpuMemo, id+1-len(sm.memo[n]))...)
		}
		m := &sm.memo[n][id]
		if !m.valid || m.version != s.Version || m.gen != gen {
			*m = vgpuMemo{valid: true, version: s.Version, gen: gen}
			m.fits, m.score = filterScore(n)
		}
		if m.fits && c.Better(n, m.score, best, bestScore) {
			best, bestScore = n, m.score
		}
	}
	return best
}

func newVGPUPolicy(t *Trace, policy string) (*vgpuPolicy, error) {
	cfg := config.Default().NVIDIA
	b, err := vgpu.New(vgpu.Options{Config: &cfg, Clock: fixedClock{}})
	if err != nil {
		return nil, fmt.Errorf("create vGPU backend: %w", err)
	}
	v := &vgpuPolicy{policy: policy, backend: b, devs: make([]device.Devices, len(t.Nodes)),
		memo: newShapeMemo(len(t.Nodes))}
	if o, ok := any(b).(observer); ok {
		v.obs = o
	}
	for i := range t.Nodes {
		d, err := b.NewDevices(vgpuNode(i, &t.Nodes[i]))
		if err != nil || d == nil {
			return nil, fmt.Errorf("decode node %s: devices %v: %w", t.Nodes[i].Name, d, err)
		}
		v.devs[i] = d
	}
	return v, nil
}

// cardUUID names card g of node n.
func cardUUID(n, g int) string { return "GPU-" + strconv.Itoa(n) + "-" + strconv.Itoa(g) }

// VGPUNode is node i (in name order) of the trace as its vGPU agent
// registers it, with the trace's CPU and memory allocatable and the vGPU
// totals the plugin advertises on it: the node our policies see in the
// simulator, for a Volcano session to see the same.
func VGPUNode(i int, n *Node) *v1.Node {
	node := vgpuNode(i, n)
	q := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	node.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:                             *resource.NewMilliQuantity(n.CPU, resource.DecimalSI),
		v1.ResourceMemory:                          *resource.NewQuantity(n.Memory<<20, resource.BinarySI),
		config.DefaultResourceCountName:            q(int64(n.GPUs) * splitCount),
		config.DefaultResourceMemoryName:           q(int64(n.GPUs) * cardMemMiB(n.Model)),
		config.DefaultResourceMemoryPercentageName: q(int64(n.GPUs) * 100),
		config.DefaultResourceCoreName:             q(int64(n.GPUs) * 100),
		config.DefaultResourcePriorityName:         q(int64(n.GPUs) * splitCount),
	}
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	return node
}

// VGPUPod is arrival seq (counted from 1) of pod p as our policies see it
// in the simulator.
func VGPUPod(p *Pod, seq int) *v1.Pod { return vgpuPod(p, seq) }

// CardsOf reads the cards of node n (index in name order) that a
// volcano.sh/vgpu-ids-new value names.
func CardsOf(ids string, n int) ([]int, error) { return cardsOf(ids, n) }

// vgpuNode is the node as its vGPU agent registers it.
func vgpuNode(i int, n *Node) *v1.Node {
	mem := cardMemMiB(n.Model)
	cards := make([]vgpuproto.Card, n.GPUs)
	for g := range cards {
		cards[g] = vgpuproto.Card{UUID: cardUUID(i, g), Count: splitCount, MemMiB: mem, Type: n.Model, Healthy: true,
			Mode: vgpuproto.ModeHAMiCore}
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Annotations: map[string]string{
		vgpuproto.AnnotationRegister:  vgpuproto.EncodeRegister(cards),
		vgpuproto.AnnotationHandshake: "Reported_2026-01-01T00:00:00Z",
	}}}
}

// vgpuPod is the trace pod as a user would submit it: a share asks for one
// card with milli/10 percent of its cores and memory, whole cards for
// vgpu-number cards at 100%, and the accepted models as use-gputype.
func vgpuPod(p *Pod, seq int) *v1.Pod {
	name := p.Name + "-" + strconv.Itoa(seq)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "openb", UID: types.UID(name),
		Annotations: map[string]string{}}}
	req := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(p.CPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(p.Memory<<20, resource.BinarySI),
	}
	lim := v1.ResourceList{}
	if p.NumGPU > 0 {
		pct := p.Milli / 10
		lim[config.DefaultResourceCountName] = *resource.NewQuantity(int64(p.NumGPU), resource.DecimalSI)
		lim[config.DefaultResourceCoreName] = *resource.NewQuantity(pct, resource.DecimalSI)
		lim[config.DefaultResourceMemoryPercentageName] = *resource.NewQuantity(pct, resource.DecimalSI)
		if len(p.Spec) > 0 {
			pod.Annotations[vgpuproto.AnnotationUseType] = strings.Join(p.Spec, ",")
		}
	}
	pod.Spec.Containers = []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}}
	return pod
}

func (v *vgpuPolicy) Place(c *Cluster, p *Pod) (int, []int, bool, error) {
	v.seq++
	pod := vgpuPod(p, v.seq)
	var gen uint64
	if v.obs != nil {
		v.obs.ObserveRequest(pod)
		gen = v.obs.WorkloadGeneration()
	}
	// As the plugin does: the request prepared once, Fit on each node with
	// Volcano's NodeInfo.Idle (device.Fitter).
	prep, err := v.backend.Prepare(pod, v.policy)
	if err != nil {
		return -1, nil, false, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	best := v.memo.best(c, p, gen, func(n int) (fits bool, score float64) {
		host := device.Host{CPUMilli: c.Nodes[n].CPU, MemMiB: c.Nodes[n].Memory, Known: true}
		sc, st := v.devs[n].(device.Fitter).Fit(pod, prep, host)
		if fits = st.IsSuccess(); fits && (p.NumGPU > 0 || !v.gpuOnly) {
			score = sc
		}
		return fits, score
	})
	if best < 0 {
		return -1, nil, false, nil
	}
	if p.NumGPU == 0 {
		return best, nil, true, nil
	}
	host := device.Host{CPUMilli: c.Nodes[best].CPU, MemMiB: c.Nodes[best].Memory, Known: true}
	r, err := v.devs[best].(device.Fitter).AllocatePrepared(pod, prep, host)
	if err != nil {
		return -1, nil, false, fmt.Errorf("allocate pod %s: %w", pod.Name, err)
	}
	cards, err := cardsOf(r.Annotations[vgpuproto.AnnotationIDs], best)
	if err != nil {
		return -1, nil, false, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return best, cards, true, nil
}

// cardsOf reads the card indices of node n from a vgpu-ids-new value.
func cardsOf(ids string, n int) ([]int, error) {
	prefix := cardUUID(n, 0)
	prefix = prefix[:len(prefix)-1]
	entries, err := vgpuproto.DecodeAllocation(ids)
	if err != nil {
		return nil, fmt.Errorf("annotation %s=%q: %w", vgpuproto.AnnotationIDs, ids, err)
	}
	var out []int
	for _, devs := range entries {
		for _, d := range devs {
			g, err := strconv.Atoi(strings.TrimPrefix(d.UUID, prefix))
			if err != nil || !strings.HasPrefix(d.UUID, prefix) {
				return nil, fmt.Errorf("annotation %s=%q: card %q is not on node %d", vgpuproto.AnnotationIDs, ids, d.UUID, n)
			}
			out = append(out, g)
		}
	}
	if out == nil {
		return nil, fmt.Errorf("annotation %s=%q: no card", vgpuproto.AnnotationIDs, ids)
	}
	return out, nil
}
