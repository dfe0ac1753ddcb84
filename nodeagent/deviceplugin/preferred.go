package deviceplugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Preferrer answers the kubelet's GetPreferredAllocation for one container
// request: the cards (UUIDs, one per device wanted, in order) the
// container's allocation names, or nil when the agent does not know (no
// pending pod matches). The plugin turns the cards into device IDs and
// guarantees a valid answer whatever the Preferrer returns.
type Preferrer interface {
	PreferredCards(ctx context.Context, req *pluginapi.ContainerPreferredAllocationRequest) []string
}

// GetPreferredAllocation implements DevicePluginServer. The kubelet calls it
// before Allocate, one container at a time, when GetDevicePluginOptions
// says GetPreferredAllocationAvailable (only when Options.Preferrer is set).
// Every answer is valid (CheckPreferred): the kubelet's devicemanager
// (pkg/kubelet/cm/devicemanager/manager.go, devicesToAllocate) fails the
// container's admission when this call returns an error, and takes the
// answer only as far as it intersects the available devices, filling the
// rest with its own choice, so an invalid answer silently loses the
// scheduler's cards.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.ContainerRequests {
		var cards []string
		if p.opts.Preferrer != nil {
			cards = p.opts.Preferrer.PreferredCards(ctx, r)
		}
		ids := PreferByCard(r.AvailableDeviceIDs, r.MustIncludeDeviceIDs, int(r.AllocationSize), cards)
		klog.V(4).InfoS("Preferred allocation", "resource", p.opts.ResourceName, "cards", cards, "devices", ids,
			"size", r.AllocationSize, "available", len(r.AvailableDeviceIDs), "mustInclude", r.MustIncludeDeviceIDs)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// CardOf returns the card UUID of a virtual device ID "<UUID>-<i>"
// (VirtualDeviceID), or the ID itself when it has no numeric suffix.
func CardOf(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return id
	}
	if _, err := strconv.Atoi(id[i+1:]); err != nil {
		return id
	}
	return id[:i]
}

// slot is the index part of a virtual device ID (-1 without one), for a
// numeric order of a card's devices.
func slot(id string) int {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return -1
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return -1
	}
	return n
}

// PreferByCard picks size device IDs among available: every must-include ID
// first, then one device of each wanted card in turn (a must-include device
// of that card counts for it), then, for what is left, devices of cards not
// chosen yet before second devices of a card, cards in UUID order and a
// card's devices in index order. The answer is always a valid preferred
// allocation (CheckPreferred), or nil when none exists (fewer available
// devices than size, or more must-include devices than size, which the
// kubelet never asks): an empty answer makes the kubelet choose alone.
func PreferByCard(available, mustInclude []string, size int, cards []string) []string {
	avail := make(map[string]bool, len(available))
	for _, id := range available {
		avail[id] = true
	}
	chosen := map[string]bool{}
	var out []string
	take := func(id string) {
		chosen[id] = true
		out = append(out, id)
	}
	for _, id := range mustInclude {
		if !chosen[id] {
			take(id)
		}
	}
	if len(out) > size || len(avail) < size || !subset(out, avail) {
		return nil
	}
	// The free devices by card, each card's in index order.
	free := map[string][]string{}
	var order []string
	for _, id := range sortedIDs(available) {
		if chosen[id] {
			continue
		}
		c := CardOf(id)
		if _, ok := free[c]; !ok {
			order = append(order, c)
		}
		free[c] = append(free[c], id)
	}
	covered := map[string]int{} // must-include devices per card, not yet matched to a wanted card
	for _, id := range mustInclude {
		covered[CardOf(id)]++
	}
	for _, c := range cards {
		if len(out) == size {
			break
		}
		if covered[c] > 0 {
			covered[c]--
			continue
		}
		if ids := free[c]; len(ids) > 0 {
			take(ids[0])
			free[c] = ids[1:]
		}
	}
	// The rest: devices of cards the container has none of yet first,
	// spreading it over distinct cards as the scheduler would, then second
	// devices card by card. There are always enough: out and the free
	// devices together are the available ones, at least size.
	for len(out) < size {
		spread := false
		for _, c := range order {
			if ids := free[c]; len(out) < size && len(ids) > 0 && !hasCard(out, c) {
				take(ids[0])
				free[c] = ids[1:]
				spread = true
			}
		}
		if spread {
			continue
		}
		for _, c := range order {
			if ids := free[c]; len(out) < size && len(ids) > 0 {
				take(ids[0])
				free[c] = ids[1:]
			}
		}
	}
	return out
}

func hasCard(ids []string, card string) bool {
	return slices.ContainsFunc(ids, func(id string) bool { return CardOf(id) == card })
}

func subset(ids []string, set map[string]bool) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}

// sortedIDs orders device IDs by card UUID, then by index.
func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(CardOf(a), CardOf(b)), cmp.Compare(slot(a), slot(b)), cmp.Compare(a, b))
	})
	return slices.Compact(out)
}

// CheckPreferred reports why a preferred allocation is not one the kubelet
// takes whole: the kubelet's devicemanager (manager.go, devicesToAllocate)
// allocates preferred ∩ available, up to the size, and fills the rest
// itself; the must-include devices are already allocated to the container.
// So a usable answer has exactly size distinct devices, all available, with
// every must-include device among them.
func CheckPreferred(available, mustInclude []string, size int, got []string) error {
	avail := make(map[string]bool, len(available))
	for _, id := range available {
		avail[id] = true
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			return fmt.Errorf("preferred allocation %v names %s twice", got, id)
		}
		seen[id] = true
		if !avail[id] {
			return fmt.Errorf("preferred allocation %v names %s, which is not available", got, id)
		}
	}
	for _, id := range mustInclude {
		if !seen[id] {
			return fmt.Errorf("preferred allocation %v leaves out the must-include device %s", got, id)
		}
	}
	if len(got) != size {
		return fmt.Errorf("preferred allocation %v has %d devices, want %d", got, len(got), size)
	}
	return nil
}
