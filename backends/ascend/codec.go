package ascend

import (
	"fmt"
	"strings"

	"github.com/vgpushare/vshare/protocol/ascendproto"
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

// encode renders the uses as HAMi's pod-devices value, one entry per
// container (containers without NPUs are empty).
func (d *Devices) encode(uses []use, containers int) string {
	out := make([][]ascendproto.CardAssignment, containers)
	for _, u := range uses {
		if int(u.ctr) < containers {
			out[u.ctr] = append(out[u.ctr], ascendproto.CardAssignment{UUID: d.info[u.card].id, Type: d.b.name, MemMiB: u.mem,
				Cores: u.cores})
		}
	}
	return ascendproto.EncodeAssignments(out)
}

// decode reads a pod-devices value back into uses, checking every card
// against the node: at most one entry per container, a known card of this
// chip type and memory within the card.
func (d *Devices) decode(value string, containers int) ([]use, error) {
	if n := strings.Count(strings.TrimSuffix(value, ";"), ";") + 1; value != "" && n > containers {
		return nil, fmt.Errorf("%d container entries for a pod of %d containers", n, containers)
	}
	entries, err := ascendproto.DecodeAssignments(value)
	if err != nil {
		return nil, err
	}
	var uses []use
	for ctr, cards := range entries {
		for _, a := range cards {
			u, err := d.decodeCard(a, ctr)
			if err != nil {
				return nil, fmt.Errorf("container %d: %w", ctr, err)
			}
			uses = append(uses, u)
		}
	}
	if len(uses) == 0 {
		return nil, fmt.Errorf("no card recorded")
	}
	return uses, nil
}

func (d *Devices) decodeCard(a ascendproto.CardAssignment, ctr int) (use, error) {
	i, ok := d.index[a.UUID]
	if !ok {
		return use{}, fmt.Errorf("card %s: no card %s of type %s on node %s", a.UUID, a.UUID, d.b.name, d.node)
	}
	if a.Type != d.b.name {
		return use{}, fmt.Errorf("card %s: type %q: want %s", a.UUID, a.Type, d.b.name)
	}
	if a.MemMiB > d.info[i].memMiB {
		return use{}, fmt.Errorf("card %s: memory %d: want MiB in [1, %d]", a.UUID, a.MemMiB, d.info[i].memMiB)
	}
	return use{card: int32(i), ctr: int32(ctr), mem: a.MemMiB, cores: a.Cores, tmpl: d.templateOf(a.MemMiB)}, nil
}

// runtimeValue renders huawei.com/<commonWord>: per card in container
// order, the template name (template mode; none for a whole card) or the
// memory and cores (hami-core mode).
func (d *Devices) runtimeValue(uses []use) string {
	out := make([]ascendproto.RuntimeEntry, 0, len(uses))
	for _, u := range uses {
		id := d.info[u.card].id
		switch {
		case d.soft:
			out = append(out, ascendproto.SoftEntry(id, u.mem, u.cores))
		case u.tmpl >= 0:
			out = append(out, ascendproto.TemplateEntry(id, d.templates[u.tmpl].Name))
		default:
			out = append(out, ascendproto.TemplateEntry(id, ""))
		}
	}
	return ascendproto.EncodeRuntimeInfo(out)
}
