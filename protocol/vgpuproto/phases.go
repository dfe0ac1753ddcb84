package vgpuproto

import (
	v1 "k8s.io/api/core/v1"
)

// Role says what kind of container an allocation entry is for, which
// decides when the container runs beside the pod's others and so what the
// pod holds of a card at its peak (Peak).
type Role uint8

const (
	// RoleApp is a regular container (pod.Spec.Containers): they all run
	// together, beside every sidecar.
	RoleApp Role = iota
	// RoleInit is a regular init container: it runs to completion, beside
	// the sidecars declared before it only, before the next init container
	// starts.
	RoleInit
	// RoleSidecar is a restartable init container (restartPolicy Always,
	// Kubernetes' native sidecar): started in init-container order, it keeps
	// running beside every later init container and the regular containers.
	RoleSidecar
)

// IsSidecar reports whether an init container is a native sidecar
// (restartPolicy Always), as the kubelet's IsRestartableInitContainer
// (pkg/kubelet/types) decides.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// InitEntries returns how many leading entries of an n-entry allocation
// value recorded for pod are its init containers': all of them when the
// value has one entry per init and regular container and the pod has init
// containers (init containers first, in spec order, as the kubelet admits
// them and as HAMi v2.9 lays out hami.io/vgpu-devices-allocated), else 0
// (entries for regular containers only: every allocation whose init
// containers hold no card, and Volcano v1.10's, which lists only the
// containers asking for vGPUs). The counts cannot collide: a value of
// regular containers only has at most len(pod.Spec.Containers) entries.
func InitEntries(pod *v1.Pod, n int) int {
	if k := len(pod.Spec.InitContainers); k > 0 && n == k+len(pod.Spec.Containers) {
		return k
	}
	return 0
}

// EntryRoles returns the role of each entry of an n-entry allocation value
// recorded for pod (see InitEntries), or nil when every entry is a regular
// container's.
func EntryRoles(pod *v1.Pod, n int) []Role {
	k := InitEntries(pod, n)
	if k == 0 {
		return nil
	}
	roles := make([]Role, n)
	for i := range pod.Spec.InitContainers {
		roles[i] = RoleInit
		if IsSidecar(&pod.Spec.InitContainers[i]) {
			roles[i] = RoleSidecar
		}
	}
	return roles
}

// EntryContainer returns the container of entry i of an n-entry allocation
// value recorded for pod, and whether it is an init container; nil when
// the value has more entries than the pod has containers. For a value of
// fewer entries than regular containers (Volcano v1.10's), entry i is
// mapped to regular container i: callers that read that form map it
// themselves.
func EntryContainer(pod *v1.Pod, n, i int) (c *v1.Container, init bool) {
	k := InitEntries(pod, n)
	switch {
	case i < 0:
		return nil, false
	case i < k:
		return &pod.Spec.InitContainers[i], true
	case i-k < len(pod.Spec.Containers):
		return &pod.Spec.Containers[i-k], false
	}
	return nil, false
}

// Span is the run of phases a container is active in, First to Last. The
// phases of a pod are its regular init containers' runs, one each in
// order (0, 1, ...), then the run of its regular containers, the last.
type Span struct{ First, Last int }

// Spans returns the span of each entry of roles and the number of phases:
// a regular init container runs in its own phase, a sidecar from the
// first regular init container declared after it to the end, a regular
// container in the last phase. Nil roles (every entry a regular
// container's) have one phase.
func Spans(roles []Role) ([]Span, int) {
	inits := 0
	for _, r := range roles {
		if r == RoleInit {
			inits++
		}
	}
	spans := make([]Span, len(roles))
	seen := 0
	for i, r := range roles {
		switch r {
		case RoleInit:
			spans[i] = Span{seen, seen}
			seen++
		case RoleSidecar:
			spans[i] = Span{seen, inits}
		default:
			spans[i] = Span{inits, inits}
		}
	}
	return spans, inits + 1
}

// Use is one card of one container entry, for Peak.
type Use[K comparable] struct {
	// Entry is the container entry's index.
	Entry int
	// Card identifies the card (its UUID, or an index into the node's
	// cards).
	Card K
	// Mem and Cores are what the container takes of the card.
	Mem   int64
	Cores int32
	// Whole marks a use counted in every phase of the pod, whatever its
	// container: a MIG instance, which no later container of the pod takes
	// over (each gets its own instance).
	Whole bool
}

// Charge is what a pod holds of one card at its peak.
type Charge[K comparable] struct {
	Card K
	// Mem and Cores are the most memory and cores the pod's containers
	// running together hold of the card, Holders the most containers
	// holding it together: each the largest in any one phase, on its own.
	Mem     int64
	Cores   int32
	Holders int32
}

// Peak returns what the pod holds of each card at its peak, per card in
// the order uses first name it: for each of memory, cores and holders, the
// largest sum over the containers that run together in one phase (Spans).
// With nil roles every container runs together and each value is the sum
// over the card's uses; so is it for Whole uses in any pod. A card's
// resources are checked one by one (memory, cores and share count against
// the card's), so the largest of each on its own is exactly what the card
// must have free, though the three may peak in different phases.
//
// This is the rule HAMi applies since its init container (#1773) and
// sidecar (#2723) support (pkg/device CollapseInitContainerUsage: per card,
// the larger of each init container plus the sidecars declared before it
// and of the sidecars plus the regular containers). HAMi then shrinks a
// pod's usage to its sidecars and regular containers once its init
// containers have succeeded; a reader of this protocol keeps the peak for
// the pod's life, since the kubelet runs the init containers again when
// it recreates the pod's sandbox and keeps their devices allocated to the
// pod until the pod ends (docs/architecture.md, "Init containers and
// sidecars").
func Peak[K comparable](roles []Role, uses []Use[K]) []Charge[K] {
	var out []Charge[K]
	index := func(card K) int {
		for i := range out {
			if out[i].Card == card {
				return i
			}
		}
		out = append(out, Charge[K]{Card: card})
		return len(out) - 1
	}
	if roles == nil {
		for _, u := range uses {
			c := &out[index(u.Card)]
			c.Mem, c.Cores, c.Holders = c.Mem+u.Mem, c.Cores+u.Cores, c.Holders+1
		}
		return out
	}
	spans, phases := Spans(roles)
	for _, u := range uses {
		index(u.Card)
	}
	for i := range out {
		c := &out[i]
		for p := 0; p < phases; p++ {
			var mem int64
			var cores, holders int32
			for _, u := range uses {
				if u.Card != c.Card || !(u.Whole || u.Entry >= len(spans) || spans[u.Entry].First <= p && p <= spans[u.Entry].Last) {
					continue
				}
				mem, cores, holders = mem+u.Mem, cores+u.Cores, holders+1
			}
			c.Mem, c.Cores, c.Holders = max(c.Mem, mem), max(c.Cores, cores), max(c.Holders, holders)
		}
	}
	return out
}

// PeakOfEntries is Peak over decoded allocation entries, their NVIDIA
// cards keyed by UUID with the memory recorded; a MIG instance is Whole.
func PeakOfEntries(roles []Role, entries [][]Device) []Charge[string] {
	var uses []Use[string]
	for i, devs := range entries {
		for _, d := range devs {
			if d.Type == DeviceTypeNVIDIA {
				uses = append(uses, Use[string]{Entry: i, Card: d.UUID, Mem: d.Mem, Cores: d.Cores, Whole: d.IsMIG()})
			}
		}
	}
	return Peak(roles, uses)
}
