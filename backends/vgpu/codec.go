package vgpu

import (
	"fmt"
	"strconv"
	"strings"
)

// decodeUses reads a vgpu-ids-new value: per container (";"-separated, at
// most ncontainers) the cards as "UUID,type,memMiB,cores:" entries, a MIG
// instance as "UUID[group-pos]". Every card must be registered on the node.
func (d *Devices) decodeUses(value string, ncontainers int) ([]use, error) {
	parts := strings.Split(value, ";")
	if len(parts) > max(ncontainers, 1) {
		return nil, fmt.Errorf("%d container entries for a pod with %d containers", len(parts), ncontainers)
	}
	var uses []use
	for ctr, part := range parts {
		first := len(uses)
		rest := part
		for rest != "" {
			var entry string
			entry, rest, _ = strings.Cut(rest, ":")
			if entry == "" {
				return nil, fmt.Errorf("container %d: empty card entry in %q", ctr, part)
			}
			u, err := d.decodeUse(entry)
			if err != nil {
				return nil, fmt.Errorf("container %d card %q: %w", ctr, entry, err)
			}
			for _, prev := range uses[first:] {
				if prev.card == u.card {
					return nil, fmt.Errorf("container %d holds card %s twice", ctr, d.info[u.card].uuid)
				}
			}
			uses = append(uses, u)
		}
	}
	if len(uses) == 0 {
		return nil, fmt.Errorf("no card recorded")
	}
	return uses, nil
}

// decodeUse reads one "UUID[group-pos],type,memMiB,cores" entry.
func (d *Devices) decodeUse(entry string) (use, error) {
	u := use{migGroup: -1, migPos: -1}
	f := strings.Split(entry, ",")
	if len(f) != 4 {
		return u, fmt.Errorf("want UUID,type,memMiB,cores")
	}
	id, suffix, isMIG := strings.Cut(f[0], "[")
	u.card = -1
	for i := range d.info {
		if d.info[i].uuid == id {
			u.card = int32(i)
			break
		}
	}
	if u.card < 0 {
		return u, fmt.Errorf("card %q is not registered on the node", id)
	}
	mem, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || mem < 0 || mem > MaxMemoryMiB {
		return u, fmt.Errorf("memory %q: want MiB in [0, %d]", f[2], MaxMemoryMiB)
	}
	cores, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || cores < 0 || cores > int64(d.info[u.card].coresTotal) {
		return u, fmt.Errorf("cores %q: want a whole number in [0, %d]", f[3], d.info[u.card].coresTotal)
	}
	u.mem, u.recMem, u.cores = mem, mem, int32(cores)
	if !isMIG {
		return u, nil
	}
	ci := &d.info[u.card]
	group, pos, ok := parseMIGSuffix(suffix)
	if !ok {
		return u, fmt.Errorf("MIG instance %q: want UUID[group-position]", f[0])
	}
	if ci.mig == nil {
		return u, fmt.Errorf("MIG instance %q on card %s, which has no known MIG geometry", f[0], id)
	}
	g := ci.mig.groupIndex(group)
	inst, found := ci.mig.instanceAt(g, pos)
	if !found {
		return u, fmt.Errorf("MIG instance %q: the card's geometries have no group %q with position %d", f[0], group, pos)
	}
	u.migGroup, u.migPos, u.mem = int16(g), int16(pos), inst
	return u, nil
}

// parseMIGSuffix reads "group-pos]".
func parseMIGSuffix(s string) (string, int, bool) {
	body, ok := strings.CutSuffix(s, "]")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(body, '-')
	if i <= 0 {
		return "", 0, false
	}
	pos, err := strconv.Atoi(body[i+1:])
	if err != nil || pos < 0 || pos >= maxMIGPositions {
		return "", 0, false
	}
	return body[:i], pos, true
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
			return fmt.Errorf("card %s runs MIG geometry %s, not %s", ci.uuid, ci.mig.groups[c.migGroup].name,
				ci.mig.groups[u.migGroup].name)
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

// encodeAllocation renders picks as vgpu-ids-new: one entry per regular
// container (empty for containers without cards), ";"-separated, so the
// node agent's container index matches the pod's.
func (d *Devices) encodeAllocation(picks []pick, ncontainers int) string {
	buf := make([]byte, 0, 64*len(picks)+ncontainers)
	p := 0
	for ctr := 0; ctr < ncontainers; ctr++ {
		if ctr > 0 {
			buf = append(buf, ';')
		}
		for ; p < len(picks) && int(picks[p].ctr) == ctr; p++ {
			pk := &picks[p]
			ci := &d.info[pk.card]
			buf = append(buf, ci.uuid...)
			if pk.migPos >= 0 {
				buf = append(buf, '[')
				buf = append(buf, ci.mig.groups[pk.migGroup].name...)
				buf = append(buf, '-')
				buf = strconv.AppendInt(buf, int64(pk.migPos), 10)
				buf = append(buf, ']')
			}
			buf = append(buf, ',')
			buf = append(buf, DeviceTypeNVIDIA...)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, pk.recMem, 10)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(pk.cores), 10)
			buf = append(buf, ':')
		}
	}
	return string(buf)
}
