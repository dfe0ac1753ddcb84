package request

import (
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Container is what one container asks for: Nums cards, each with MemMiB
// of memory (or Pct percent of the card when MemMiB is 0) and Cores
// percent of its SMs. Entry is its entry in the allocation (the regular
// container's index, after the init containers' entries when the pod has
// those: see Pod.Inits) and Role says when it runs (init.go).
type Container struct {
	Entry  int
	Role   vgpuproto.Role
	Nums   int32
	MemMiB int64
	Pct    int32
	Cores  int32
}

// MemOn returns the memory the container takes on a card of total MiB.
// Percentages are computed per card in 64-bit arithmetic, so 50% is half of
// each card whatever its size (upstream v1.10 divides pct/100 as integers
// first and gets 0).
func (c *Container) MemOn(total int64) int64 {
	if c.MemMiB > 0 {
		return c.MemMiB
	}
	return total * int64(c.Pct) / 100
}

// Pod is a pod's vGPU request with the annotations that shape it. It is
// read-only once parsed.
type Pod struct {
	// The requesting containers are ctrBuf[:nctrs], or extra when there are
	// more than fit ctrBuf (a slice into the value itself would make every
	// Pod escape to the heap).
	ctrBuf [4]Container
	nctrs  int
	extra  []Container
	// Containers is the number of entries of the allocation: one per
	// regular container, after Inits entries for the init containers when
	// one of them asks for cards (0 otherwise, which keeps the value of
	// pods without such requests as it always was).
	Containers, Inits int
	// Roles are the entries' roles when Inits > 0 (nil otherwise: every
	// entry a regular container's).
	Roles []vgpuproto.Role
	// Mode is the operating mode the pod asks for, "" for any.
	Mode string
	// UseType and NoUseType are upper-cased comma-separated type selectors.
	UseType, NoUseType string
	// UseUUID and NoUseUUID are comma-separated UUID selectors.
	UseUUID, NoUseUUID string
	// CardPolicy is binpack, spread, topology-aware or fragment;
	// NodePolicy binpack, spread or fragment.
	CardPolicy, NodePolicy string
	NUMABind               bool
	// Gang is "namespace/podgroup" when the pod asks for PodGroup spread.
	Gang string
	// Rules are the exclusive rules the pod's labels match (a bit each).
	Rules uint64
	// Key encodes every field above: two requests with one key fit the
	// same cards the same way (the backend's ResultKey), and are equal
	// but for Host.
	Key string
	// Host is what the pod takes outside the cards (CPU and memory), which
	// only the fragment policy weighs; it is not part of Key.
	Host HostUse
}

// HostUse is what a pod takes outside the cards: CPU in milli-cores and
// memory in MiB.
type HostUse struct{ CPUMilli, MemMiB int64 }

// hostUse is the pod's CPU and memory request: the sum over its regular
// containers (requests, else limits).
func hostUse(pod *v1.Pod) HostUse {
	var u HostUse
	for i := range pod.Spec.Containers {
		r := &pod.Spec.Containers[i].Resources
		q, ok := r.Requests[v1.ResourceCPU]
		if !ok {
			q = r.Limits[v1.ResourceCPU]
		}
		u.CPUMilli += q.MilliValue()
		m, ok := r.Requests[v1.ResourceMemory]
		if !ok {
			m = r.Limits[v1.ResourceMemory]
		}
		u.MemMiB += m.Value() >> 20
	}
	return u
}

// fingerprint encodes the request's fields into Key.
func (r *Pod) fingerprint() {
	b := make([]byte, 0, 64)
	for _, c := range r.Ctrs() {
		b = strconv.AppendInt(b, int64(c.Entry), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Role), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Nums), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.MemMiB, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Pct), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.Cores), 10)
		b = append(b, ';')
	}
	b = strconv.AppendInt(b, int64(r.Containers), 10)
	b = strconv.AppendInt(append(b, ','), int64(r.Inits), 10)
	// Every entry's role, those of init containers asking for no card
	// included: they set the phases the others run in (vgpuproto.Spans).
	for _, role := range r.Roles {
		b = strconv.AppendInt(append(b, ','), int64(role), 10)
	}
	b = strconv.AppendUint(append(b, 0), r.Rules, 16)
	b = strconv.AppendBool(append(b, 0), r.NUMABind)
	for _, f := range [...]string{r.Mode, r.UseType, r.NoUseType, r.UseUUID, r.NoUseUUID, r.CardPolicy, r.NodePolicy, r.Gang} {
		b = append(append(b, 0), f...)
	}
	r.Key = string(b)
}

// Empty reports whether the pod asks for no card.
func (r *Pod) Empty() bool { return r.nctrs == 0 && r.extra == nil }

// Ctrs returns the requesting containers in container order.
func (r *Pod) Ctrs() []Container {
	if r.extra != nil {
		return r.extra
	}
	return r.ctrBuf[:r.nctrs]
}

// add appends a requesting container.
func (r *Pod) add(c Container) {
	switch {
	case r.extra != nil:
		r.extra = append(r.extra, c)
	case r.nctrs < len(r.ctrBuf):
		r.ctrBuf[r.nctrs] = c
		r.nctrs++
	default:
		r.extra = append(append(make([]Container, 0, 2*r.nctrs), r.ctrBuf[:r.nctrs]...), c)
	}
}

// gangKey identifies a PodGroup across namespaces.
func gangKey(namespace, group string) string { return namespace + "/" + group }

// PodGang returns the pod's PodGroup key, "" without one.
func PodGang(pod *v1.Pod) string {
	if g := pod.Annotations[AnnotationGroupName]; g != "" {
		return gangKey(pod.Namespace, g)
	}
	return ""
}
