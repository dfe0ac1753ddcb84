package mindcluster

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
	"github.com/vgpushare/vshare/vnpu"
)

// maxCores bounds a request's AI cores: far above any node (a 310P server
// holds at most a few dozen chips), low enough to keep arithmetic small.
const maxCores = 4096

// request is what a pod asks of the 310P chips.
type request struct {
	// cores is the AI cores of the one container asking.
	cores int64
	// level and dvpp are the pod's vnpu-level and vnpu-dvpp labels.
	level, dvpp string
}

// asks reports whether a container or init container names
// huawei.com/npu-core with a non-zero quantity (invalid values included, so
// that ValidateRequest can refuse them).
func asks(pod *v1.Pod) bool { return podres.Asks(pod, mindclusterproto.ResourceNPUCore) }

// parseRequest reads and checks the pod's request: the ring-controller
// label, one container asking for a whole number of AI cores, and vnpu-level
// and vnpu-dvpp values TemplateFor accepts. Core counts below a chip must be
// a template's (1, 2 or 4); larger ones are whole chips, checked per node
// because chips differ in AI cores.
func parseRequest(pod *v1.Pod) (request, error) {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if q, ok := podres.Quantity(c, mindclusterproto.ResourceNPUCore); ok && !q.IsZero() {
			return request{}, fmt.Errorf("init container %q: %s=%s: 310P NPUs are served to containers only",
				c.Name, mindclusterproto.ResourceNPUCore, q.String())
		}
	}
	var r request
	asking := ""
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		v, present, err := podres.Whole(c, mindclusterproto.ResourceNPUCore, maxCores)
		if err != nil {
			return request{}, err
		}
		if !present || v == 0 {
			continue
		}
		if asking != "" {
			return request{}, fmt.Errorf("containers %q and %q both ask for %s: MindCluster allocates one container's AI cores per pod",
				asking, c.Name, mindclusterproto.ResourceNPUCore)
		}
		asking, r.cores = c.Name, v
	}
	if asking == "" {
		return request{}, fmt.Errorf("no container asks for a positive %s", mindclusterproto.ResourceNPUCore)
	}
	if got := pod.Labels[mindclusterproto.LabelRingController]; got != mindclusterproto.RingController310P {
		return request{}, fmt.Errorf("container %q asks for %s but pod label %s=%q: want %q",
			asking, mindclusterproto.ResourceNPUCore, mindclusterproto.LabelRingController, got, mindclusterproto.RingController310P)
	}
	r.level, r.dvpp = pod.Labels[mindclusterproto.LabelVNPULevel], pod.Labels[mindclusterproto.LabelVNPUDVPP]
	// Validate the labels even for whole chips, which ignore them: a typo
	// should not wait until the pod shrinks to a vNPU.
	if _, err := vnpu.TemplateFor(1, r.level, r.dvpp); err != nil {
		return request{}, fmt.Errorf("pod labels: %w", err)
	}
	if r.cores < minWholeChip && !isTemplateCores(r.cores) {
		return request{}, fmt.Errorf("container %q: %s=%d: want 1, 2 or 4 (a vNPU) or whole chips (a multiple of the node's AI cores per chip, %d or more)",
			asking, mindclusterproto.ResourceNPUCore, r.cores, minWholeChip)
	}
	return r, nil
}

// minWholeChip is the fewest AI cores of any 310P chip (servertype
// Ascend310P-8); fewer cores must be a vNPU template.
const minWholeChip = 8

func isTemplateCores(c int64) bool { return c == 1 || c == 2 || c == 4 }
