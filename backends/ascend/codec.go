package ascend

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// use is one card of one container of an accounted pod.
type use struct {
	card int32
	ctr  int32
	// mem and cores are what the record says (MiB; soft-mode core percent,
	// 0 in template mode); tmpl is the template the card is charged.
	mem   int64
	cores int32
	tmpl  int16
}

// encode renders the picks as HAMi's pod-devices value:
// "UUID,<commonWord>,memMiB,cores:" per card, ";" after every container
// (containers without NPUs are empty), as HAMi's EncodePodSingleDevice.
func (d *Devices) encode(uses []use, containers int) string {
	var b strings.Builder
	for c := 0; c < containers; c++ {
		for _, u := range uses {
			if int(u.ctr) != c {
				continue
			}
			b.WriteString(d.info[u.card].id)
			b.WriteByte(',')
			b.WriteString(d.b.name)
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(u.mem, 10))
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(int64(u.cores), 10))
			b.WriteByte(':')
		}
		b.WriteByte(';')
	}
	return b.String()
}

// decode reads a pod-devices value back into uses, checking every card
// against the node: a known card of this chip type, memory within the card,
// cores within [0, 100], a card at most once per container and at most one
// entry per container.
func (d *Devices) decode(value string, containers int) ([]use, error) {
	if value == "" {
		return nil, fmt.Errorf("empty value: want \"UUID,%s,memMiB,cores:\" per card and \";\" after each container", d.b.name)
	}
	entries := strings.Split(strings.TrimSuffix(value, ";"), ";")
	if len(entries) > containers {
		return nil, fmt.Errorf("%d container entries for a pod of %d containers", len(entries), containers)
	}
	var uses []use
	for ctr, entry := range entries {
		if entry == "" {
			continue
		}
		if !strings.HasSuffix(entry, ":") {
			return nil, fmt.Errorf("container %d entry %q: want cards ending in \":\"", ctr, entry)
		}
		first := len(uses)
		for _, card := range strings.Split(strings.TrimSuffix(entry, ":"), ":") {
			u, err := d.decodeCard(card, ctr)
			if err != nil {
				return nil, fmt.Errorf("container %d: %w", ctr, err)
			}
			for _, prev := range uses[first:] {
				if prev.card == u.card {
					return nil, fmt.Errorf("container %d: card %s listed twice", ctr, d.info[u.card].id)
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

func (d *Devices) decodeCard(card string, ctr int) (use, error) {
	f := strings.Split(card, ",")
	if len(f) != 4 {
		return use{}, fmt.Errorf("card %q: want UUID,%s,memMiB,cores", card, d.b.name)
	}
	i, ok := d.index[f[0]]
	if !ok {
		return use{}, fmt.Errorf("card %q: no card %s of type %s on node %s", card, f[0], d.b.name, d.node)
	}
	if f[1] != d.b.name {
		return use{}, fmt.Errorf("card %q: type %q: want %s", card, f[1], d.b.name)
	}
	mem, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || mem <= 0 || mem > d.info[i].memMiB {
		return use{}, fmt.Errorf("card %q: memory %q: want MiB in [1, %d]", card, f[2], d.info[i].memMiB)
	}
	cores, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || cores < 0 || cores > fullCores {
		return use{}, fmt.Errorf("card %q: cores %q: want 0 to %d", card, f[3], fullCores)
	}
	return use{card: int32(i), ctr: int32(ctr), mem: mem, cores: int32(cores), tmpl: d.templateOf(mem)}, nil
}

// runtimeInfo is one entry of huawei.com/<commonWord> (HAMi RuntimeInfo).
type runtimeInfo struct {
	UUID   string `json:"UUID,omitempty"`
	Temp   string `json:"temp,omitempty"`
	Memory int64  `json:"memory,omitempty"`
	Core   int32  `json:"core,omitempty"`
}

// runtimeValue renders huawei.com/<commonWord>: per card in container
// order, the template name (template mode; none for a whole card) or the
// memory and cores (hami-core mode).
func (d *Devices) runtimeValue(uses []use) string {
	out := make([]runtimeInfo, 0, len(uses))
	for _, u := range uses {
		ri := runtimeInfo{UUID: d.info[u.card].id}
		if d.soft {
			ri.Memory, ri.Core = u.mem, u.cores
		} else if u.tmpl >= 0 {
			ri.Temp = d.templates[u.tmpl].Name
		}
		out = append(out, ri)
	}
	s, err := json.Marshal(out)
	if err != nil {
		// A slice of plain structs always marshals.
		return "[]"
	}
	return string(s)
}
