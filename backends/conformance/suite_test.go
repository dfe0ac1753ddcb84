package conformance

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/device"
)

// A toy backend: a node has N slots, a pod takes a number of them, recorded
// in one annotation. Bugs can be switched on to check that the suite
// notices them.
const (
	slotsResource   v1.ResourceName = "example.com/slots"
	slotsAnnotation string          = "example.com/slots-taken"
)

type bugs struct {
	overcommit      bool // FilterNode and Allocate ignore capacity
	leakyRelease    bool // Release forgets to give slots back
	sharedCopy      bool // DeepCopy shares the pod map
	acceptMalformed bool // AddResource ignores unreadable annotations
	doubleCount     bool // AddResource counts a pod again
}

type slotsBackend struct{ bugs bugs }

func (b *slotsBackend) Name() string { return "slots" }
func (b *slotsBackend) HasDeviceRequest(pod *v1.Pod) bool {
	return slotsRequest(pod) > 0
}
func (b *slotsBackend) ValidateRequest(*v1.Pod) error     { return nil }
func (b *slotsBackend) InventoryKey(node *v1.Node) string { return "" }
func (b *slotsBackend) NewDevices(node *v1.Node) (device.Devices, error) {
	q := node.Status.Capacity[slotsResource]
	return &slots{b: b, capacity: q.Value(), pods: map[string]int64{}}, nil
}

func slotsRequest(pod *v1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Limits[slotsResource]
		n += q.Value()
	}
	return n
}

type slots struct {
	b        *slotsBackend
	capacity int64
	pods     map[string]int64
}

func (s *slots) used() int64 {
	var u int64
	for _, n := range s.pods {
		u += n
	}
	return u
}

func (s *slots) AddResource(pod *v1.Pod) error {
	value, ok := pod.Annotations[slotsAnnotation]
	if !ok || slotsRequest(pod) == 0 {
		return nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n != slotsRequest(pod) {
		if s.b.bugs.acceptMalformed {
			s.pods[string(pod.UID)] = 1
			return nil
		}
		return fmt.Errorf("annotation %s=%q: want the pod's request %d", slotsAnnotation, value, slotsRequest(pod))
	}
	key := string(pod.UID)
	if s.b.bugs.doubleCount {
		key += strconv.Itoa(len(s.pods))
	}
	if _, ok := s.pods[key]; !ok {
		s.pods[key] = n
	}
	return nil
}

func (s *slots) SubResource(pod *v1.Pod) error { delete(s.pods, string(pod.UID)); return nil }
func (s *slots) AddQueueResource(pod *v1.Pod) map[string]float64 {
	if n, ok := s.pods[string(pod.UID)]; ok {
		return map[string]float64{string(slotsResource): float64(n)}
	}
	return nil
}
func (s *slots) HasDeviceRequest(pod *v1.Pod) bool { return slotsRequest(pod) > 0 }
func (s *slots) FilterNode(pod *v1.Pod, _ string) *device.Status {
	if s.b.bugs.overcommit || slotsRequest(pod) <= s.capacity-s.used() {
		return nil
	}
	return device.NewStatus(device.Unschedulable, "not enough slots")
}
func (s *slots) ScoreNode(pod *v1.Pod, _ string) float64 {
	return float64(device.MaxScore) * float64(min(s.used()+slotsRequest(pod), s.capacity)) / float64(s.capacity)
}
func (s *slots) Allocate(pod *v1.Pod, policy string) (*device.Reservation, error) {
	n := slotsRequest(pod)
	if n == 0 {
		return nil, nil
	}
	if !s.FilterNode(pod, policy).IsSuccess() {
		return nil, fmt.Errorf("not enough slots")
	}
	s.pods[string(pod.UID)] = n
	return &device.Reservation{Annotations: map[string]string{slotsAnnotation: strconv.FormatInt(n, 10)}}, nil
}
func (s *slots) Release(pod *v1.Pod, r *device.Reservation) error {
	if r == nil {
		return nil
	}
	if r.Annotations[slotsAnnotation] != strconv.FormatInt(s.pods[string(pod.UID)], 10) {
		return fmt.Errorf("annotation %s=%q does not match", slotsAnnotation, r.Annotations[slotsAnnotation])
	}
	if !s.b.bugs.leakyRelease {
		delete(s.pods, string(pod.UID))
	}
	return nil
}
func (s *slots) GetIgnoredDevices() []string { return nil }
func (s *slots) GetStatus() string           { return fmt.Sprintf("%d/%d slots", s.used(), s.capacity) }
func (s *slots) DeepCopy() device.Devices {
	if s.b.bugs.sharedCopy {
		return &slots{b: s.b, capacity: s.capacity, pods: s.pods}
	}
	pods := make(map[string]int64, len(s.pods))
	for k, v := range s.pods {
		pods[k] = v
	}
	return &slots{b: s.b, capacity: s.capacity, pods: pods}
}

func slotsSuite(b bugs) Suite {
	return Suite{
		Backend: &slotsBackend{bugs: b},
		Node: func() *v1.Node {
			return &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{slotsResource: resource.MustParse("10")}}}
		},
		Pod: func(rng *rand.Rand) *v1.Pod {
			return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{slotsResource: *resource.NewQuantity(1+rng.Int64N(4), resource.DecimalSI)},
			}}}}}
		},
		Usage: func(d device.Devices) []Usage {
			s := d.(*slots)
			return []Usage{{Name: "slots", Used: s.used(), Capacity: s.capacity}}
		},
		Malformed: []Malformed{
			{Name: "not a number", Annotations: map[string]string{slotsAnnotation: "x"}, Key: slotsAnnotation},
			{Name: "wrong count", Annotations: map[string]string{slotsAnnotation: "99"}, Key: slotsAnnotation},
		},
		Seed: 7,
	}
}

func TestRunPassesACorrectBackend(t *testing.T) {
	Run(t, slotsSuite(bugs{}))
}

// recorder collects failures instead of failing the test; Fatal ends the
// calling goroutine as testing.T's does.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func record(t *testing.T, check func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failures
}

func TestChecksCatchBugs(t *testing.T) {
	const policy = device.PolicyBinpack
	tests := []struct {
		name  string
		bugs  bugs
		check func(tb testing.TB, s Suite)
		want  string // a substring of one failure
	}{
		{name: "overcommit", bugs: bugs{overcommit: true},
			check: func(tb testing.TB, s Suite) { checkNoOvercommit(tb, s, policy, 1) }, want: "slots is"},
		{name: "leaky release", bugs: bugs{leakyRelease: true},
			check: func(tb testing.TB, s Suite) { checkReleaseRestores(tb, s, policy, 2) }, want: "Allocate+Release"},
		{name: "shared copy", bugs: bugs{sharedCopy: true},
			check: func(tb testing.TB, s Suite) { checkDeepCopyIndependent(tb, s, policy, 3) }, want: "original after"},
		{name: "malformed accepted", bugs: bugs{acceptMalformed: true},
			check: func(tb testing.TB, s Suite) { checkMalformedRejected(tb, s, policy, 4) }, want: "AddResource accepted"},
		{name: "double count", bugs: bugs{doubleCount: true},
			check: func(tb testing.TB, s Suite) { checkAddResourceMatchesAllocate(tb, s, policy, 5) },
			want:  "already accounted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := slotsSuite(tc.bugs).withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			failures := record(t, func(tb testing.TB) { tc.check(tb, s) })
			for _, f := range failures {
				if strings.Contains(f, tc.want) {
					return
				}
			}
			t.Errorf("no failure mentions %q; failures: %q", tc.want, failures)
		})
	}
}

func TestSuiteValidation(t *testing.T) {
	_, err := Suite{}.withDefaults()
	for _, field := range []string{"Backend", "Node", "Pod", "Usage", "Malformed"} {
		if err == nil || !strings.Contains(err.Error(), "Suite."+field) {
			t.Errorf("withDefaults of an empty Suite: %v, want an error naming Suite.%s", err, field)
		}
	}
	s, err := slotsSuite(bugs{}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if s.Pods != defaultPods || len(s.Policies) != 2 {
		t.Errorf("defaults: Pods %d, Policies %v; want %d and binpack, spread", s.Pods, s.Policies, defaultPods)
	}
}
