package ascend

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// ctrRequest is what one container asks for: nums cards, each with memMiB
// of memory (0: the whole card) and cores percent of its AI cores (soft
// mode); coreSet records that the core resource was named.
type ctrRequest struct {
	ctr     int
	nums    int32
	memMiB  int64
	cores   int32
	coreSet bool
}

// podRequest is a pod's request with the annotations that shape it.
type podRequest struct {
	ctrs       []ctrRequest
	containers int
	// soft is true when the pod asks for hami-core slicing (the
	// huawei.com/vnpu-mode annotation or a core resource).
	soft bool
	// useUUID and noUseUUID are comma-separated card selectors.
	useUUID, noUseUUID string
}

// asks reports whether any container names one of the resources with a
// non-zero quantity.
func (b *Backend) asks(pod *v1.Pod) bool { return podres.Asks(pod, b.resCount, b.resMemory, b.resCore) }

// parse reads the pod's request into r. Pods without a request give an
// empty request and no error.
func (b *Backend) parse(pod *v1.Pod, r *podRequest) error {
	*r = podRequest{containers: len(pod.Spec.Containers)}
	if err := podres.CheckInitContainers(pod, "NPUs", b.resCount, b.resMemory, b.resCore); err != nil {
		return err
	}
	for i := range pod.Spec.Containers {
		c, ok, err := b.parseContainer(&pod.Spec.Containers[i])
		if err != nil {
			return fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
		}
		if ok {
			c.ctr = i
			r.ctrs = append(r.ctrs, c)
			r.soft = r.soft || c.coreSet
		}
	}
	if len(r.ctrs) == 0 {
		return nil
	}
	a := pod.Annotations
	switch m := a[ascendproto.AnnotationVNPUMode]; m {
	case "":
	case ascendproto.ModeHAMiCore:
		r.soft = true
	default:
		return fmt.Errorf("pod %s/%s: annotation %s=%q: want %s or nothing (templates)", pod.Namespace, pod.Name,
			ascendproto.AnnotationVNPUMode, m, ascendproto.ModeHAMiCore)
	}
	r.useUUID, r.noUseUUID = a[b.keys.UseUUID], a[b.keys.NoUseUUID]
	return nil
}

// parseContainer reads one container's request; ok is false when it asks
// for no card.
func (b *Backend) parseContainer(c *v1.Container) (ctrRequest, bool, error) {
	var out ctrRequest
	r := podres.NewReader(c)
	n, hasN := r.Whole(b.resCount, ascendproto.MaxCards)
	mem, hasMem := r.Whole(b.resMemory, ascendproto.MaxMemoryMiB/b.factor)
	cores, hasCores := r.Whole(b.resCore, fullCores)
	if err := r.Err(); err != nil {
		return out, false, err
	}
	shaped := (hasMem && mem > 0) || (hasCores && cores > 0)
	switch {
	case !hasN && !shaped:
		return out, false, nil
	case n == 0 && shaped:
		return out, false, fmt.Errorf("container %q asks for %s or %s without %s: want %s of at least 1",
			c.Name, b.resMemory, b.resCore, b.resCount, b.resCount)
	case n == 0:
		return out, false, nil
	}
	out.nums, out.memMiB, out.cores, out.coreSet = int32(n), mem*b.factor, int32(cores), hasCores
	if out.memMiB > b.capacity {
		return out, false, fmt.Errorf("container %q: %s=%d: fits no %s template nor the whole chip (%d MiB)",
			c.Name, b.resMemory, mem, b.name, b.capacity)
	}
	if out.nums > 1 && out.memMiB > 0 {
		if t, _ := b.chip.RoundUp(out.memMiB); !t.Whole() {
			return out, false, fmt.Errorf("container %q: %s=%d with %s=%d: a request for several cards takes whole cards; "+
				"drop the memory or ask for at least %d MiB", c.Name, b.resMemory, mem, b.resCount, n, b.chip.Total.MemoryMiB)
		}
	}
	return out, true, nil
}
