package allocate

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

var _ deviceplugin.Preferrer = (*Allocator)(nil)

// PreferredCards implements deviceplugin.Preferrer: the cards of the entry
// Allocate will serve next for a request of AllocationSize devices, found
// as Allocate finds it (the oldest pod in bind-phase allocating whose next
// pending entry has that many cards, container by container), so the
// device IDs the kubelet records for the container (pod resources API,
// checkpoints) name the cards the scheduler chose. It only looks: a pod
// Allocate would refuse is not marked failed here but left for Allocate
// to refuse, and nil (no preference) is returned for it, as when no pod
// matches; HAMi's device plugin likewise answers from the pending pod's
// annotation and leaves the choice to the kubelet when it cannot
// (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go,
// GetPreferredAllocation).
func (a *Allocator) PreferredCards(ctx context.Context, req *pluginapi.ContainerPreferredAllocationRequest) []string {
	n := int(req.AllocationSize)
	if n <= 0 {
		return nil
	}
	inv := a.opts.Inventory()
	// The kubelet asks right before Allocate, so the pod may not have
	// reached the informer yet: wait for it as Allocate does.
	arrived := a.arrivals.Arrive(ctx)
	best, err := allocation.Wait(ctx, a.opts.InformerWait, func() (*candidate, bool, error) {
		allow, final := arrived.Allowed()
		c, refused, err := a.look(ctx, inv, n, allow)
		return c, refused || final, err
	})
	if err != nil {
		klog.V(4).InfoS("No preferred allocation", "node", a.opts.Node, "size", n, "err", err)
		return nil
	}
	entry := best.Entry()
	cards := make([]string, len(entry))
	for i, d := range entry {
		cards[i] = d.UUID
	}
	klog.V(4).InfoS("Preferring the scheduler's cards", "pod", klog.KObj(best.Pod), "container", best.Container.Name, "cards", cards)
	return cards
}

// look is choose without side effects: the best matching pod among those
// in allow (any when nil), and whether a pod was passed over for a reason
// Allocate would refuse it for.
func (a *Allocator) look(ctx context.Context, inv *nvidia.Inventory, n int, allow map[types.UID]bool) (*candidate, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods, err := a.opts.Lookup.Allocating()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	req := allocation.Request{Devices: n, Now: a.opts.Clock.Now(), Allow: allow}
	choice := allocation.NewChoice(nil, (*candidate).Before)
	for _, pod := range pods {
		if !req.Admits(pod) {
			continue
		}
		c, err := a.match(pod, inv, req)
		if err != nil && !errors.Is(err, allocation.ErrNotForRequest) {
			klog.V(4).InfoS("Pending pod not considered for a preferred allocation", "pod", klog.KObj(pod), "err", err)
		}
		choice.Offer(ctx, pod, c, err)
	}
	best, ok := choice.Chosen()
	if !ok {
		return nil, choice.Refused(), fmt.Errorf("node %s: no pending vGPU pod matches a request for %d devices: %w", a.opts.Node, n, ErrNoPendingPod)
	}
	return best, false, nil
}
