package request

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Init containers and native sidecars (init containers with restartPolicy
// Always) may ask for vGPUs like regular containers. What the kubelet does
// with them (k8s.io/kubernetes v1.30 pkg/kubelet/cm/devicemanager,
// docs/architecture.md "Init containers and sidecars") sets the rules:
//
//   - It admits the containers in spec order, init containers first
//     (topologymanager's scope Admit), one Allocate per container asking
//     for devices, so the allocation lists the init containers' entries
//     first (Pod.Inits), in the order the node agent serves them.
//   - A regular init container's devices stay the pod's and become
//     reusable: the next containers asking for the resource take reusable
//     devices first (manager.go, Allocate and devicesToAllocate), a
//     sidecar or a regular container taking them for good. When fewer are
//     asked than are reusable, which ones a container gets is a Go map's
//     order, random; the scheduler cannot choose its cards then, so such a
//     request is refused (checkReuse). Otherwise the container gets every
//     reusable device plus fresh ones, and the scheduler places it on the
//     reusable devices' cards (the backend's choosePhased), so the device
//     IDs the kubelet records for each container are of the cards it
//     runs on.
//   - What the pod holds of a card is the most its containers running
//     together hold (vgpuproto.Peak), kept for the pod's life.

// parseInitContainers reads the init containers' requests into r. When one
// of them asks for cards, every init container gets an entry, before the
// regular containers' (r.Inits, r.Roles).
func (p *Parser) parseInitContainers(pod *v1.Pod, r *Pod) error {
	inits := pod.Spec.InitContainers
	for i := range inits {
		c, ok, err := p.parseContainer(&inits[i])
		if err != nil {
			return fmt.Errorf("pod %s/%s init %w", pod.Namespace, pod.Name, err)
		}
		if !ok {
			continue
		}
		c.Entry, c.Role = i, vgpuproto.RoleInit
		if vgpuproto.IsSidecar(&inits[i]) {
			c.Role = vgpuproto.RoleSidecar
		}
		r.add(c)
	}
	if r.Empty() {
		return nil
	}
	r.Inits = len(inits)
	r.Containers += r.Inits
	r.Roles = vgpuproto.EntryRoles(pod, r.Containers)
	return nil
}

// checkReuse refuses a request whose cards the kubelet's reuse of init
// containers' devices would leave to chance: a container asking for fewer
// cards than the regular init container before it left reusable (and no
// sidecar or regular container took since). The containers come in the
// kubelet's order (init containers, then regular ones); containers asking
// for no card do not touch the reusable devices.
func (p *Parser) checkReuse(pod *v1.Pod, r *Pod) error {
	if r.Inits == 0 {
		return nil
	}
	reusable, from := int32(0), 0
	for _, c := range r.Ctrs() {
		if c.Nums < reusable {
			return fmt.Errorf("%s: %s=%d: the kubelet gives it %d of the %d devices init container %q leaves for reuse, "+
				"picked at random, so its cards cannot be chosen; want 0 or at least %d",
				entryName(pod, r, c.Entry), p.ResCount, c.Nums, c.Nums, reusable, pod.Spec.InitContainers[from].Name, reusable)
		}
		if c.Role == vgpuproto.RoleInit {
			reusable, from = c.Nums, c.Entry
		} else {
			reusable = 0
		}
	}
	return nil
}

// entryName names the container of allocation entry i: `init container
// "x"` or `container "x"`.
func entryName(pod *v1.Pod, r *Pod, i int) string {
	if i < r.Inits {
		return fmt.Sprintf("init container %q", pod.Spec.InitContainers[i].Name)
	}
	return fmt.Sprintf("container %q", pod.Spec.Containers[i-r.Inits].Name)
}
