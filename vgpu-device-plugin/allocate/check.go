package allocate

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// cardUse is what the node's vGPU pods hold on one card.
type cardUse struct {
	count int
	mem   int64
	cores int64
	// mig counts the holders of each MIG instance, by "group-pos".
	mig map[migSlot]int
}

type migSlot struct {
	group string
	pos   int
}

// check validates the candidate's entry against the node's cards, the
// container's request and everything else allocated on the node. It returns
// the cards' use (the candidate included) for the response.
func (a *Allocator) check(c *candidate, inv *nvidia.Inventory) (map[string]*cardUse, error) {
	ref := klog.KObj(c.Pod).String()
	entry := c.Entry()
	if err := a.checkEntry(ref, entry, inv); err != nil {
		return nil, err
	}
	if err := checkRequest(ref, c.Container, entry, inv); err != nil {
		return nil, err
	}
	uses, err := a.usage(c.Pod, inv)
	if err != nil {
		return nil, err
	}
	for _, d := range entry {
		card, _ := inv.Card(d.UUID)
		u := uses[d.UUID]
		if d.IsMIG() {
			if n := u.mig[migSlot{d.MIGGroup, d.MIGPos}]; n > 1 {
				return nil, fmt.Errorf("pod %s: MIG instance %s[%s-%d] is held by %d allocations: %w", ref, d.UUID, d.MIGGroup, d.MIGPos, n, ErrOverCommit)
			}
			for slot := range u.mig {
				if slot.group != d.MIGGroup {
					return nil, fmt.Errorf("pod %s: card %s runs MIG geometry %s, the entry asks for %s: %w", ref, d.UUID, slot.group, d.MIGGroup, ErrOverCommit)
				}
			}
			continue
		}
		switch {
		case u.count > int(card.Count):
			return nil, fmt.Errorf("pod %s: card %s would be shared by %d containers, its split count is %d: %w", ref, d.UUID, u.count, card.Count, ErrOverCommit)
		case u.mem > inv.ToUnit(card.MemoryMiB):
			return nil, fmt.Errorf("pod %s: card %s would have %d of %d memory allocated: %w", ref, d.UUID, u.mem, inv.ToUnit(card.MemoryMiB), ErrOverCommit)
		case u.cores > int64(card.Cores):
			return nil, fmt.Errorf("pod %s: card %s would have %d%% of %d%% cores allocated: %w", ref, d.UUID, u.cores, card.Cores, ErrOverCommit)
		}
	}
	return uses, nil
}

// checkEntry validates each card of the entry on its own.
func (a *Allocator) checkEntry(ref string, entry []vgpuproto.Device, inv *nvidia.Inventory) error {
	seen := map[string]bool{}
	for _, d := range entry {
		if d.Type != vgpuproto.DeviceTypeNVIDIA {
			return fmt.Errorf("pod %s: device type %q: want %s: %w", ref, d.Type, vgpuproto.DeviceTypeNVIDIA, ErrForged)
		}
		card, ok := inv.Card(d.UUID)
		if !ok {
			return fmt.Errorf("pod %s: card %s is not registered on node %s: %w", ref, d.UUID, a.opts.Node, ErrForged)
		}
		if seen[d.UUID] {
			return fmt.Errorf("pod %s: card %s appears twice in one container: %w", ref, d.UUID, ErrForged)
		}
		seen[d.UUID] = true
		if !a.opts.Healthy(d.UUID) {
			return fmt.Errorf("pod %s: card %s: %w", ref, d.UUID, ErrUnhealthy)
		}
		if d.IsMIG() != (card.Mode == config.OperatingModeMIG) {
			return fmt.Errorf("pod %s: card %s is in %s mode, the entry %s: %w", ref, d.UUID, card.Mode,
				map[bool]string{true: "names a MIG instance", false: "is not a MIG instance"}[d.IsMIG()], ErrForged)
		}
		if d.IsMIG() {
			continue
		}
		if max := inv.ToUnit(card.MemoryMiB); d.Mem > max {
			return fmt.Errorf("pod %s: card %s: memory %d exceeds the card's %d: %w", ref, d.UUID, d.Mem, max, ErrForged)
		}
		if d.Cores > card.Cores {
			return fmt.Errorf("pod %s: card %s: cores %d%% exceed the card's %d%%: %w", ref, d.UUID, d.Cores, card.Cores, ErrForged)
		}
	}
	return nil
}

// checkRequest compares the entry with what the container asks for.
func checkRequest(ref string, ctr *v1.Container, entry []vgpuproto.Device, inv *nvidia.Inventory) error {
	nv := inv.NVIDIA
	count, ok := limit(ctr, nv.ResourceCountName)
	if !ok || count != int64(len(entry)) {
		return fmt.Errorf("pod %s container %s: asks for %d of %s (present: %v), the entry has %d cards: %w",
			ref, ctr.Name, count, nv.ResourceCountName, ok, len(entry), ErrForged)
	}
	memMiB, hasMem := limit(ctr, nv.ResourceMemoryName)
	memMiB *= max(int64(nv.GPUMemoryFactor), 1)
	pct, hasPct := limit(ctr, nv.ResourceMemoryPercentageName)
	cores, hasCores := limit(ctr, nv.ResourceCoreName)
	if !hasCores {
		cores = int64(nv.DefaultCores)
	}
	for _, d := range entry {
		if d.IsMIG() {
			continue
		}
		card, _ := inv.Card(d.UUID)
		got := inv.ToMiB(d.Mem)
		allowed := card.MemoryMiB
		switch {
		case hasMem:
			allowed = memMiB
		case hasPct:
			allowed = (card.MemoryMiB*pct + 99) / 100
		case nv.DefaultMemory > 0:
			allowed = int64(nv.DefaultMemory)
		}
		if got > allowed {
			return fmt.Errorf("pod %s container %s: card %s: %d MiB allocated, the container asks for at most %d MiB: %w",
				ref, ctr.Name, d.UUID, got, allowed, ErrForged)
		}
		if int64(d.Cores) > cores {
			return fmt.Errorf("pod %s container %s: card %s: %d%% cores allocated, the container asks for %d%% (%s): %w",
				ref, ctr.Name, d.UUID, d.Cores, cores, nv.ResourceCoreName, ErrForged)
		}
	}
	return nil
}

// usage adds up the allocations (volcano.sh/vgpu-ids-new) of the node's
// vGPU pods, pod included, skipping failed ones: each pod's shared cards
// at its peak (vgpu.Peak: init containers one at a time, beside the
// sidecars declared before them; the scheduler charges the same), its MIG
// instances each.
func (a *Allocator) usage(pod *v1.Pod, inv *nvidia.Inventory) (map[string]*cardUse, error) {
	pods, err := a.opts.Lookup.Assigned()
	if err != nil {
		return nil, fmt.Errorf("find the node's vGPU pods: %w", err)
	}
	uses := make(map[string]*cardUse, len(inv.Cards))
	for _, c := range inv.Cards {
		uses[c.UUID] = &cardUse{mig: map[migSlot]int{}}
	}
	self := false
	add := func(p *v1.Pod) {
		if a.tracker.Failed(p.UID) || p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseFailed {
			return
		}
		ids, err := vgpuproto.DecodeAllocation(p.Annotations[vgpuproto.AnnotationIDs])
		if err != nil {
			klog.V(2).InfoS("Ignoring a pod's undecodable vGPU allocation", "pod", klog.KObj(p), "err", err)
			return
		}
		var shared []vgpuproto.Use[string]
		for i, ctr := range ids {
			for _, d := range ctr {
				u, ok := uses[d.UUID]
				switch {
				case !ok || d.Type != vgpuproto.DeviceTypeNVIDIA:
				case d.IsMIG():
					u.count++
					u.mig[migSlot{d.MIGGroup, d.MIGPos}]++
				default:
					shared = append(shared, vgpuproto.Use[string]{Entry: i, Card: d.UUID, Mem: d.Mem, Cores: d.Cores})
				}
			}
		}
		for _, c := range vgpuproto.Peak(vgpuproto.EntryRoles(p, len(ids)), shared) {
			u := uses[c.Card]
			u.count += int(c.Holders)
			u.mem += c.Mem
			u.cores += int64(c.Cores)
		}
	}
	for _, p := range pods {
		if p.UID == pod.UID {
			self = true
		}
		add(p)
	}
	if !self {
		add(pod)
	}
	return uses, nil
}
