package gpushare

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// containerAmount returns the container's quantity of res as an integer, 0
// when absent. Negative, fractional and oversized values are errors naming
// the container, the resource, the value and what is allowed.
func containerAmount(c *v1.Container, res v1.ResourceName) (int64, error) {
	q, ok := podres.Quantity(c, res)
	if !ok {
		return 0, nil
	}
	if v, ok := q.AsInt64(); ok && v >= 0 && v <= gpushareproto.MaxQuantity {
		return v, nil
	}
	return 0, fmt.Errorf("container %q: %s=%s: want a whole number in [0, %d]", c.Name, res, q.String(), gpushareproto.MaxQuantity)
}

// isSidecar reports whether an init container keeps running beside the
// regular containers (restartPolicy Always).
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// podRequest returns the pod's request of res following the Kubernetes pod
// request rule: regular containers and sidecars run together and add up;
// each ordinary init container runs alone beside the sidecars started
// before it; the pod needs the larger of the two. Upstream Volcano ignores
// sidecars (it takes max(sum of containers, largest init container)), which
// gives the same result for every pod without a sidecar asking for res.
func podRequest(pod *v1.Pod, res v1.ResourceName) (int64, error) {
	var running, sidecars, initPeak int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		v, err := containerAmount(c, res)
		if err != nil {
			return 0, fmt.Errorf("pod %s/%s init %w", pod.Namespace, pod.Name, err)
		}
		if isSidecar(c) {
			sidecars += v
			running += v
			initPeak = max(initPeak, sidecars)
			continue
		}
		initPeak = max(initPeak, sidecars+v)
	}
	for i := range pod.Spec.Containers {
		v, err := containerAmount(&pod.Spec.Containers[i], res)
		if err != nil {
			return 0, fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
		}
		running += v
	}
	return max(running, initPeak), nil
}

// asksFor reports whether any container names res with a non-zero quantity.
// Invalid values (negative, fractional) count as asking, so that such pods
// reach ValidateRequest and are refused instead of running without a card.
func asksFor(pod *v1.Pod, res v1.ResourceName) bool { return podres.Asks(pod, res) }

// validateRequest checks the pod's request of res and that it does not ask
// for both modes at once: the single volcano.sh/gpu-index annotation cannot
// record a shared card and whole cards together.
func validateRequest(pod *v1.Pod, res v1.ResourceName) error {
	if _, err := podRequest(pod, res); err != nil {
		return fmt.Errorf("invalid GPU request: %w", err)
	}
	if asksFor(pod, gpushareproto.ResourceGPUMemory) && asksFor(pod, gpushareproto.ResourceGPUNumber) {
		return fmt.Errorf("invalid GPU request: pod %s/%s asks for both %s and %s; "+
			"a pod may use one of them, since %s records either one shared card or whole cards",
			pod.Namespace, pod.Name, gpushareproto.ResourceGPUMemory, gpushareproto.ResourceGPUNumber, gpushareproto.AnnotationGPUIndex)
	}
	return nil
}
