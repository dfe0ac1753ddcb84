package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// Suite describes the backend under test.
type Suite struct {
	// Backend is the backend under test. It must be deterministic (a fixed
	// clock): equal states must give equal reservations.
	Backend device.Backend
	// Node returns a new node with devices of the backend's type;
	// Backend.NewDevices must return non-nil Devices for it.
	Node func() *v1.Node
	// Pod returns a pod asking for a random amount of the device, drawn
	// from rng. Sizes should range from small to more than the node can
	// hold next to other pods, so the node fills up within Pods draws. The
	// suite overrides the pod's name, namespace and UID.
	Pod func(rng *rand.Rand) *v1.Pod
	// Usage reports every bounded quantity of the state (per-card memory,
	// cores, slots, exclusive holders, use of unhealthy cards with capacity
	// 0...). No overcommit means Used <= Capacity for every entry.
	Usage func(d device.Devices) []Usage
	// Malformed lists corruptions of a valid reservation that AddResource
	// must refuse. At least one is required.
	Malformed []Malformed

	// Seed seeds the random pod streams. Zero is a valid seed.
	Seed uint64
	// Pods is the number of random pods allocated per policy in the
	// no-overcommit check; 0 means 200.
	Pods int
	// Policies are the scheduling policies exercised; empty means
	// device.PolicyBinpack and api.PolicySpread.
	Policies []string
}

// Usage is one bounded quantity of a Devices state.
type Usage struct {
	// Name says what is counted, for example "card 2 memory".
	Name string
	// Used is the amount held by accounted pods.
	Used int64
	// Capacity is the most that may be held.
	Capacity int64
}

// Malformed is a corruption of a valid reservation.
type Malformed struct {
	// Name describes the case.
	Name string
	// Annotations are set on a pod carrying a valid reservation, replacing
	// the values of the same keys.
	Annotations map[string]string
	// Key is the annotation the error must name.
	Key string
}

// defaultPods is the number of random pods per policy when Suite.Pods is 0.
const defaultPods = 200

// withDefaults fills the optional fields and checks the required ones.
func (s Suite) withDefaults() (Suite, error) {
	var errs []error
	if s.Backend == nil {
		errs = append(errs, errors.New("conformance: Suite.Backend is required"))
	}
	if s.Node == nil {
		errs = append(errs, errors.New("conformance: Suite.Node is required"))
	}
	if s.Pod == nil {
		errs = append(errs, errors.New("conformance: Suite.Pod is required"))
	}
	if s.Usage == nil {
		errs = append(errs, errors.New("conformance: Suite.Usage is required"))
	}
	if len(s.Malformed) == 0 {
		errs = append(errs, errors.New("conformance: Suite.Malformed needs at least one case"))
	}
	for i, m := range s.Malformed {
		if m.Key == "" || len(m.Annotations) == 0 {
			errs = append(errs, fmt.Errorf("conformance: Suite.Malformed[%d] (%q) needs Key and Annotations", i, m.Name))
		}
	}
	if s.Pods < 0 {
		errs = append(errs, errors.New("conformance: Suite.Pods must not be negative"))
	}
	if s.Pods == 0 {
		s.Pods = defaultPods
	}
	if len(s.Policies) == 0 {
		s.Policies = []string{device.PolicyBinpack, device.PolicySpread}
	}
	return s, errors.Join(errs...)
}

// Run runs every conformance check against the suite's backend, each as a
// subtest named after the property and the policy.
func Run(t *testing.T, s Suite) {
	t.Helper()
	s, err := s.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for i, policy := range s.Policies {
		salt := uint64(i) << 8
		t.Run("NoOvercommit/"+policy, func(t *testing.T) { checkNoOvercommit(t, s, policy, salt|1) })
		t.Run("ReleaseRestores/"+policy, func(t *testing.T) { checkReleaseRestores(t, s, policy, salt|2) })
		t.Run("AddResourceMatchesAllocate/"+policy, func(t *testing.T) {
			checkAddResourceMatchesAllocate(t, s, policy, salt|3)
		})
		t.Run("MalformedRejected/"+policy, func(t *testing.T) { checkMalformedRejected(t, s, policy, salt|4) })
		t.Run("DeepCopyIndependent/"+policy, func(t *testing.T) { checkDeepCopyIndependent(t, s, policy, salt|5) })
		t.Run("ResultKeys/"+policy, func(t *testing.T) { checkResultKeys(t, s, policy, salt|7) })
	}
	t.Run("NoRequestIgnored", func(t *testing.T) { checkNoRequestIgnored(t, s, 6) })
}

// CardUsage turns per-card metrics (device.CardReporter) into Usage entries:
// memory, cores and holders (named holders, like "pods") per card against
// the card's capacity, and any holder of an unhealthy card against 0. Backends
// add entries for what only they bound.
func CardUsage(cards []device.CardUsage, holders string) []Usage {
	var out []Usage
	for _, c := range cards {
		n := "card " + strconv.Itoa(c.Index) + " "
		out = append(out,
			Usage{Name: n + "memory", Used: c.MemoryUsedMiB, Capacity: c.MemoryTotalMiB},
			Usage{Name: n + "cores", Used: c.CoresUsed, Capacity: c.CoresTotal},
			Usage{Name: n + holders, Used: int64(c.Pods), Capacity: int64(c.MaxPods)})
		if !c.Healthy {
			out = append(out, Usage{Name: n + "(unhealthy) " + holders, Used: int64(c.Pods)})
		}
	}
	return out
}
