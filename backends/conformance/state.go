package conformance

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/device"
)

// numProbes is the number of probe pods a snapshot filters and scores.
const numProbes = 4

// maxDraws bounds the pods drawn while looking for one that fits.
const maxDraws = 64

// env is one check's deterministic pod stream and probes.
type env struct {
	s      Suite
	rng    *rand.Rand
	next   int
	probes []*v1.Pod
}

func newEnv(tb testing.TB, s Suite, salt uint64) *env {
	tb.Helper()
	e := &env{s: s, rng: rand.New(rand.NewPCG(s.Seed, salt))}
	probeRNG := rand.New(rand.NewPCG(s.Seed, ^salt))
	for i := 0; i < numProbes; i++ {
		p := e.s.Pod(probeRNG)
		name(p, fmt.Sprintf("probe-%d", i))
		e.probes = append(e.probes, p)
	}
	return e
}

func name(p *v1.Pod, n string) {
	p.Name = n
	p.Namespace = "conformance"
	p.UID = types.UID("uid-" + n)
}

// pod draws the next pod with a device request, failing the test when the
// factory makes one the backend does not recognise or refuses.
func (e *env) pod(tb testing.TB) *v1.Pod {
	tb.Helper()
	p := e.s.Pod(e.rng)
	name(p, fmt.Sprintf("pod-%d", e.next))
	e.next++
	if !e.s.Backend.HasDeviceRequest(p) {
		tb.Fatalf("Suite.Pod made pod %s without a request Backend.HasDeviceRequest recognises", p.Name)
	}
	if err := e.s.Backend.ValidateRequest(p); err != nil {
		tb.Fatalf("Suite.Pod made pod %s that Backend.ValidateRequest refuses: %v", p.Name, err)
	}
	return p
}

// fitting draws pods until one passes FilterNode on d.
func (e *env) fitting(tb testing.TB, d device.Devices, policy string) *v1.Pod {
	tb.Helper()
	for i := 0; i < maxDraws; i++ {
		if p := e.pod(tb); d.FilterNode(p, policy).IsSuccess() {
			return p
		}
	}
	tb.Fatalf("none of %d pods from Suite.Pod fits the node (state %q)", maxDraws, d.GetStatus())
	return nil
}

// devices decodes a fresh node.
func (e *env) devices(tb testing.TB) device.Devices {
	tb.Helper()
	d, err := e.s.Backend.NewDevices(e.s.Node())
	if err != nil {
		tb.Fatalf("NewDevices(Suite.Node()): %v", err)
	}
	if d == nil {
		tb.Fatalf("NewDevices(Suite.Node()) returned no devices")
	}
	return d
}

// placement is one allocated pod and its reservation.
type placement struct {
	pod *v1.Pod
	r   *device.Reservation
}

func (p placement) annotated() *v1.Pod { return device.ApplyReservation(p.pod, p.r) }

// allocate allocates pod on d and fails the test if that fails.
func allocate(tb testing.TB, d device.Devices, pod *v1.Pod, policy string) placement {
	tb.Helper()
	r, err := d.Allocate(pod, policy)
	if err != nil {
		tb.Fatalf("Allocate(%s, %s) after FilterNode accepted it: %v", pod.Name, policy, err)
	}
	if r == nil || len(r.Annotations) == 0 {
		tb.Fatalf("Allocate(%s, %s) returned no annotations for a pod with a request", pod.Name, policy)
	}
	return placement{pod: pod, r: r}
}

// partlyFilled returns fresh devices holding up to three allocated pods,
// leaving room for more: a pod is kept only if some pod drawn afterwards
// still fits beside it.
func (e *env) partlyFilled(tb testing.TB, policy string) (device.Devices, []placement) {
	tb.Helper()
	d := e.devices(tb)
	var placed []placement
	for i := 0; i < maxDraws && len(placed) < 3; i++ {
		p := e.pod(tb)
		if !d.FilterNode(p, policy).IsSuccess() {
			continue
		}
		trial := d.DeepCopy()
		pl := allocate(tb, trial, p, policy)
		if e.roomLeft(tb, trial, policy) {
			d = trial
			placed = append(placed, pl)
		}
	}
	return d, placed
}

// roomLeft reports whether one of a few pods drawn from the stream fits d.
func (e *env) roomLeft(tb testing.TB, d device.Devices, policy string) bool {
	tb.Helper()
	for i := 0; i < 8; i++ {
		if d.FilterNode(e.pod(tb), policy).IsSuccess() {
			return true
		}
	}
	return false
}

// probeResult is how one probe pod filters and scores.
type probeResult struct {
	Pod, Policy string
	Code        int
	Reasons     []string
	Score       float64
}

// snapshot is what the suite compares of a Devices state.
type snapshot struct {
	Status string
	Usage  []Usage
	Probes []probeResult
}

func (e *env) snapshot(d device.Devices) snapshot {
	s := snapshot{Status: d.GetStatus(), Usage: e.s.Usage(d)}
	for _, p := range e.probes {
		for _, policy := range e.s.Policies {
			r := probeResult{Pod: p.Name, Policy: policy}
			if st := d.FilterNode(p, policy); st.IsSuccess() {
				r.Score = d.ScoreNode(p, policy)
			} else {
				r.Code, r.Reasons = st.Code, st.Reasons
			}
			s.Probes = append(s.Probes, r)
		}
	}
	return s
}

// same reports a difference between two snapshots (or any values).
func same(tb testing.TB, what string, want, got any) {
	tb.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// checkUsage fails the test when a usage exceeds its capacity.
func checkUsage(tb testing.TB, s Suite, d device.Devices, when string) {
	tb.Helper()
	for _, u := range s.Usage(d) {
		if u.Used > u.Capacity || u.Used < 0 {
			tb.Errorf("%s: %s is %d, want within [0, %d] (state %q)", when, u.Name, u.Used, u.Capacity, d.GetStatus())
		}
	}
}

// plainPod is a pod without any device request.
func plainPod() *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "main",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("1"),
			v1.ResourceMemory: resource.MustParse("1Gi"),
		}},
	}}}}
	name(p, "plain")
	return p
}
