package vgpu

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// decodeUses reads the pod's vgpu-ids-new value into uses, with the roles
// of its entries: one entry per regular container at most, or one per
// init and regular container (vgpuproto.InitEntries). Every card must be
// registered on the node, within its cores, and a MIG instance must exist
// in the card's geometries.
func (d *Devices) decodeUses(value string, pod *v1.Pod) ([]use, []vgpuproto.Role, error) {
	n := strings.Count(value, ";") + 1
	roles := vgpuproto.EntryRoles(pod, n)
	if roles == nil && n > max(len(pod.Spec.Containers), 1) {
		return nil, nil, errEntries(n, pod)
	}
	entries, err := vgpuproto.DecodeAllocation(value)
	if err != nil {
		return nil, nil, err
	}
	uses, err := d.usesOf(entries, false)
	return uses, roles, err
}

// usesOf maps decoded container entries to uses (only the NVIDIA cards when
// nvidiaOnly: a record that also lists other vendors' devices); a record
// without a card of ours is refused.
func (d *Devices) usesOf(entries [][]vgpuproto.Device, nvidiaOnly bool) ([]use, error) {
	var uses []use
	for ctr, devs := range entries {
		for _, dev := range devs {
			if nvidiaOnly && dev.Type != vgpuproto.DeviceTypeNVIDIA {
				continue
			}
			u, err := d.decodeUse(dev)
			if err != nil {
				return nil, errCard(ctr, dev.UUID, err)
			}
			u.entry = int32(ctr)
			uses = append(uses, u)
		}
	}
	if len(uses) == 0 {
		return nil, errNoCard
	}
	return uses, nil
}

// errNoCard refuses an allocation record without a card of ours.
var errNoCard = errors.New("no card recorded")

func errEntries(n int, pod *v1.Pod) error {
	if k := len(pod.Spec.InitContainers); k > 0 {
		return fmt.Errorf("%d container entries for a pod with %d containers and %d init containers: "+
			"want at most %d, or %d with the init containers' first", n, len(pod.Spec.Containers), k, len(pod.Spec.Containers), k+len(pod.Spec.Containers))
	}
	return fmt.Errorf("%d container entries for a pod with %d containers", n, len(pod.Spec.Containers))
}

func errCard(ctr int, uuid string, err error) error {
	return fmt.Errorf("container entry %d card %s: %w", ctr, uuid, err)
}

// decodeUse maps one decoded card to its card index on the node and checks
// it against the card.
func (d *Devices) decodeUse(dev vgpuproto.Device) (use, error) {
	u := use{card: -1, migGroup: -1, migPos: -1}
	for i := range d.info {
		if d.info[i].uuid == dev.UUID {
			u.card = int32(i)
			break
		}
	}
	if u.card < 0 {
		return u, fmt.Errorf("card %q is not registered on the node", dev.UUID)
	}
	ci := &d.info[u.card]
	if dev.Cores > ci.coresTotal {
		return u, fmt.Errorf("cores %d: want a whole number in [0, %d]", dev.Cores, ci.coresTotal)
	}
	u.mem, u.recMem, u.cores = dev.Mem, dev.Mem, dev.Cores
	if !dev.IsMIG() {
		return u, nil
	}
	if ci.mig == nil {
		return u, fmt.Errorf("MIG instance %s[%s-%d] on a card without known MIG geometry", dev.UUID, dev.MIGGroup, dev.MIGPos)
	}
	g := ci.mig.GroupIndex(dev.MIGGroup)
	inst, found := ci.mig.InstanceAt(g, dev.MIGPos)
	if !found {
		return u, fmt.Errorf("MIG instance %s[%s-%d]: the card's geometries have no group %q with position %d",
			dev.UUID, dev.MIGGroup, dev.MIGPos, dev.MIGGroup, dev.MIGPos)
	}
	u.migGroup, u.migPos, u.mem = int16(g), int16(dev.MIGPos), inst
	return u, nil
}

// checkMIG refuses MIG uses that clash with the cards' current geometry or
// take a position already in use (including twice within uses).
func (d *Devices) checkMIG(uses []use) error {
	for i, u := range uses {
		if u.migPos < 0 {
			continue
		}
		c := &d.cards[u.card]
		ci := &d.info[u.card]
		if c.migUsed != 0 && c.migGroup != u.migGroup {
			return fmt.Errorf("card %s runs MIG geometry %s, not %s", ci.uuid, ci.mig.Groups[c.migGroup].Name,
				ci.mig.Groups[u.migGroup].Name)
		}
		if c.migUsed&(1<<uint(u.migPos)) != 0 {
			return fmt.Errorf("MIG position %d of card %s is already in use", u.migPos, ci.uuid)
		}
		for _, prev := range uses[:i] {
			if prev.card == u.card && prev.migPos >= 0 && (prev.migPos == u.migPos || prev.migGroup != u.migGroup) {
				return fmt.Errorf("MIG positions of card %s clash within the pod", ci.uuid)
			}
		}
	}
	return nil
}

// encodeAllocation renders picks as vgpu-ids-new: one entry per container
// (empty for containers without cards), the init containers' first when
// one of them has cards (request.Pod.Containers), in the order the kubelet
// admits the containers and the node agent serves them.
func (d *Devices) encodeAllocation(picks []pick, ncontainers int) string {
	buf := make([]byte, 0, 64*len(picks)+ncontainers)
	p := 0
	for ctr := 0; ctr < ncontainers; ctr++ {
		if ctr > 0 {
			buf = append(buf, ';')
		}
		for ; p < len(picks) && int(picks[p].ctr) == ctr; p++ {
			buf = vgpuproto.AppendDevice(buf, d.device(&picks[p]))
		}
	}
	return string(buf)
}

// device is the allocation entry of one pick.
func (d *Devices) device(pk *pick) vgpuproto.Device {
	ci := &d.info[pk.card]
	dev := vgpuproto.Device{UUID: ci.uuid, MIGPos: -1, Type: vgpuproto.DeviceTypeNVIDIA, Mem: pk.recMem, Cores: pk.cores}
	if pk.migPos >= 0 {
		dev.MIGGroup, dev.MIGPos = ci.mig.Groups[pk.migGroup].Name, int(pk.migPos)
	}
	return dev
}

// containerDevices groups picks by container entry, ncontainers entries.
func (d *Devices) containerDevices(picks []pick, ncontainers int) [][]vgpuproto.Device {
	out := make([][]vgpuproto.Device, ncontainers)
	for i := range picks {
		out[picks[i].ctr] = append(out[picks[i].ctr], d.device(&picks[i]))
	}
	return out
}
