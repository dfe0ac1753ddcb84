package vgpu

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// ctrRequest is what one container asks for: nums cards, each with memMiB
// of memory (or pct percent of the card when memMiB is 0) and cores percent
// of its SMs. ctr is its entry in the allocation (the regular container's
// index, after the init containers' entries when the pod has those: see
// podRequest.inits) and role says when it runs (init.go).
type ctrRequest struct {
	ctr    int
	role   vgpuproto.Role
	nums   int32
	memMiB int64
	pct    int32
	cores  int32
}

// memOn returns the memory the container takes on a card of total MiB.
// Percentages are computed per card in 64-bit arithmetic, so 50% is half of
// each card whatever its size (upstream v1.10 divides pct/100 as integers
// first and gets 0).
func (c *ctrRequest) memOn(total int64) int64 {
	if c.memMiB > 0 {
		return c.memMiB
	}
	return total * int64(c.pct) / 100
}

// podRequest is a pod's vGPU request with the annotations that shape it.
type podRequest struct {
	// The requesting containers are ctrBuf[:nctrs], or extra when there are
	// more than fit ctrBuf (a slice into the value itself would make every
	// podRequest escape to the heap).
	ctrBuf [4]ctrRequest
	nctrs  int
	extra  []ctrRequest
	// containers is the number of entries of the allocation: one per
	// regular container, after inits entries for the init containers when
	// one of them asks for cards (0 otherwise, which keeps the value of
	// pods without such requests as it always was).
	containers, inits int
	// roles are the entries' roles when inits > 0 (nil otherwise: every
	// entry a regular container's).
	roles []vgpuproto.Role
	// mode is the operating mode the pod asks for, "" for any.
	mode string
	// useType and noUseType are upper-cased comma-separated type selectors.
	useType, noUseType string
	// useUUID and noUseUUID are comma-separated UUID selectors.
	useUUID, noUseUUID string
	// cardPolicy is binpack, spread or topology-aware; nodePolicy binpack
	// or spread.
	cardPolicy, nodePolicy string
	numaBind               bool
	// gang is "namespace/podgroup" when the pod asks for PodGroup spread.
	gang string
	// rules are the exclusive rules the pod's labels match (a bit each).
	rules uint64
	// key encodes every field above: two requests with one key fit the
	// same cards the same way (see Devices.memo); hash is its FNV-1a.
	key  string
	hash uint64
	// host is what the pod takes outside the cards (CPU and memory), which
	// only the fragment policy weighs; it is not part of key.
	host frag.Use
}

// fingerprint encodes the request's fields into key.
func (r *podRequest) fingerprint() {
	b := make([]byte, 0, 64)
	for _, c := range r.ctrs() {
		b = strconv.AppendInt(b, int64(c.ctr), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.role), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.nums), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.memMiB, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.pct), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(c.cores), 10)
		b = append(b, ';')
	}
	b = strconv.AppendInt(b, int64(r.containers), 10)
	b = strconv.AppendInt(append(b, ','), int64(r.inits), 10)
	b = strconv.AppendUint(append(b, 0), r.rules, 16)
	b = strconv.AppendBool(append(b, 0), r.numaBind)
	for _, f := range [...]string{r.mode, r.useType, r.noUseType, r.useUUID, r.noUseUUID, r.cardPolicy, r.nodePolicy, r.gang} {
		b = append(append(b, 0), f...)
	}
	r.key = string(b)
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	r.hash = h
}

// empty reports whether the pod asks for no card.
func (r *podRequest) empty() bool { return r.nctrs == 0 && r.extra == nil }

// ctrs returns the requesting containers in container order.
func (r *podRequest) ctrs() []ctrRequest {
	if r.extra != nil {
		return r.extra
	}
	return r.ctrBuf[:r.nctrs]
}

// add appends a requesting container.
func (r *podRequest) add(c ctrRequest) {
	switch {
	case r.extra != nil:
		r.extra = append(r.extra, c)
	case r.nctrs < len(r.ctrBuf):
		r.ctrBuf[r.nctrs] = c
		r.nctrs++
	default:
		r.extra = append(append(make([]ctrRequest, 0, 2*r.nctrs), r.ctrBuf[:r.nctrs]...), c)
	}
}

// asks reports whether any container names a vGPU resource with a non-zero
// quantity.
func (b *Backend) asks(pod *v1.Pod) bool {
	return podres.Asks(pod, b.resCount, b.resMemory, b.resPercent, b.resCores)
}

// parsed is the last request parse returned, for the pod object it read.
type parsed struct {
	pod        *v1.Pod
	uid        types.UID
	rv, policy string
	req        podRequest
	err        error
}

// parse reads the pod's request and annotations into r. policy is the
// global policy (deviceshare.SchedulePolicy). Pods without a request give
// an empty request and no error.
//
// Volcano filters and scores one task on every node in turn, on several
// goroutines, with the same pod object: the last result is kept (keyed by
// the object, its UID and resourceVersion, and the policy) and copied out,
// which takes the parse off the per-node path. A podRequest is read-only
// once parsed, so sharing its extra slice is safe.
func (b *Backend) parse(pod *v1.Pod, policy string, r *podRequest) error {
	req, err := b.request(pod, policy)
	*r = *req
	return err
}

// request is parse without the copy: the returned request is shared and
// must not be modified. The per-node paths (FilterNode, ScoreNode) use it.
func (b *Backend) request(pod *v1.Pod, policy string) (*podRequest, error) {
	if e := b.last.Load(); e != nil && e.pod == pod && e.uid == pod.UID && e.rv == pod.ResourceVersion && e.policy == policy {
		return &e.req, e.err
	}
	e := &parsed{pod: pod, uid: pod.UID, rv: pod.ResourceVersion, policy: policy}
	e.err = b.parseUncached(pod, policy, &e.req)
	b.last.Store(e)
	return &e.req, e.err
}

func (b *Backend) parseUncached(pod *v1.Pod, policy string, r *podRequest) error {
	*r = podRequest{containers: len(pod.Spec.Containers), host: frag.PodUse(pod)}
	if err := b.parseInitContainers(pod, r); err != nil {
		return err
	}
	for i := range pod.Spec.Containers {
		c, ok, err := b.parseContainer(&pod.Spec.Containers[i])
		if err != nil {
			return fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
		}
		if ok {
			c.ctr = r.inits + i
			r.add(c)
		}
	}
	if r.empty() {
		return nil
	}
	if err := b.checkReuse(pod, r); err != nil {
		return fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
	}
	if err := parseAnnotations(pod, policy, r); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.rules = b.ruleMask(pod)
	r.fingerprint()
	return nil
}

// parseContainer reads one container's request; ok is false when it asks
// for no card.
func (b *Backend) parseContainer(c *v1.Container) (ctrRequest, bool, error) {
	var out ctrRequest
	r := podres.NewReader(c)
	n, hasN := r.Whole(b.resCount, MaxGPUsPerContainer)
	mem, hasMem := r.Whole(b.resMemory, vgpuproto.MaxMemoryMiB/b.factor)
	pct, hasPct := r.Whole(b.resPercent, 100)
	cores, hasCores := r.Whole(b.resCores, fullCores)
	if err := r.Err(); err != nil {
		return out, false, err
	}
	if err := b.parsePriority(c); err != nil {
		return out, false, err
	}
	shaped := (hasMem && mem > 0) || (hasPct && pct > 0) || (hasCores && cores > 0)
	switch {
	case !hasN && !shaped:
		return out, false, nil
	case !hasN && b.defaultGPUNum == 0:
		return out, false, fmt.Errorf("container %q asks for vGPU memory or cores without %s, and nvidia.defaultGPUNum is 0: "+
			"set %s", c.Name, b.resCount, b.resCount)
	case !hasN:
		n = int64(b.defaultGPUNum)
	case n == 0 && shaped:
		return out, false, fmt.Errorf("container %q: %s=0 with vGPU memory or cores: want %s of at least 1",
			c.Name, b.resCount, b.resCount)
	case n == 0:
		return out, false, nil
	}
	out.nums = int32(n)
	out.memMiB = mem * b.factor
	switch {
	case out.memMiB > 0:
	case pct > 0:
		out.pct = int32(pct)
	case b.defaultMemMiB > 0:
		out.memMiB = b.defaultMemMiB
	default:
		out.pct = 100
	}
	out.cores = b.defaultCores
	if hasCores {
		out.cores = int32(cores)
	}
	return out, true, nil
}

// parseAnnotations reads the selectors and policies of a pod that asks for
// cards.
func parseAnnotations(pod *v1.Pod, policy string, r *podRequest) error {
	a := pod.Annotations
	switch m := a[vgpuproto.AnnotationMode]; m {
	case "", vgpuproto.ModeHAMiCore, vgpuproto.ModeMIG, vgpuproto.ModeMPS:
		r.mode = m
	default:
		return fmt.Errorf("annotation %s=%q: want %s, %s or %s", vgpuproto.AnnotationMode, m, vgpuproto.ModeHAMiCore, vgpuproto.ModeMIG, vgpuproto.ModeMPS)
	}
	r.useType = strings.ToUpper(a[vgpuproto.AnnotationUseType])
	r.noUseType = strings.ToUpper(a[vgpuproto.AnnotationNoUseType])
	r.useUUID, r.noUseUUID = a[vgpuproto.AnnotationUseUUID], a[vgpuproto.AnnotationNoUseUUID]
	if policy != device.PolicySpread && policy != PolicyFragment {
		policy = device.PolicyBinpack
	}
	r.cardPolicy, r.nodePolicy = policy, policy
	switch p := a[vgpuproto.AnnotationGPUPolicy]; p {
	case "":
	case device.PolicyBinpack, device.PolicySpread, PolicyTopologyAware:
		r.cardPolicy = p
	default:
		return fmt.Errorf("annotation %s=%q: want %s, %s or %s", vgpuproto.AnnotationGPUPolicy, p,
			device.PolicyBinpack, device.PolicySpread, PolicyTopologyAware)
	}
	switch p := a[vgpuproto.AnnotationNodePolicy]; p {
	case "":
	case device.PolicyBinpack, device.PolicySpread:
		r.nodePolicy = p
	default:
		return fmt.Errorf("annotation %s=%q: want %s or %s", vgpuproto.AnnotationNodePolicy, p, device.PolicyBinpack, device.PolicySpread)
	}
	if v, ok := a[vgpuproto.AnnotationNUMABind]; ok && v != "" {
		bind, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("annotation %s=%q: want true or false", vgpuproto.AnnotationNUMABind, v)
		}
		r.numaBind = bind
	}
	switch v := a[vgpuproto.AnnotationPodGroupPolicy]; v {
	case "":
	case vgpuproto.PodGroupPolicySpread:
		if g := a[AnnotationGroupName]; g != "" {
			r.gang = gangKey(pod.Namespace, g)
		}
	default:
		return fmt.Errorf("annotation %s=%q: want %s or nothing", vgpuproto.AnnotationPodGroupPolicy, v, vgpuproto.PodGroupPolicySpread)
	}
	return nil
}

// gangKey identifies a PodGroup across namespaces.
func gangKey(namespace, group string) string { return namespace + "/" + group }

// podGang returns the pod's PodGroup key, "" without one.
func podGang(pod *v1.Pod) string {
	if g := pod.Annotations[AnnotationGroupName]; g != "" {
		return gangKey(pod.Namespace, g)
	}
	return ""
}
