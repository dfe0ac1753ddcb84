package ascendproto

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// RuntimeEntry is one entry of huawei.com/<commonWord> (HAMi's RuntimeInfo):
// the card and either its template (template mode; none for a whole card)
// or its memory and core limits (hami-core mode).
type RuntimeEntry struct {
	UUID   string `json:"UUID,omitempty"`
	Temp   string `json:"temp,omitempty"`
	Memory *int64 `json:"memory,omitempty"`
	Core   *int32 `json:"core,omitempty"`
}

// TemplateEntry is a card's entry in template mode; template is "" for a
// whole card.
func TemplateEntry(uuid, template string) RuntimeEntry {
	return RuntimeEntry{UUID: uuid, Temp: template}
}

// SoftEntry is a card's entry in hami-core mode. HAMi declares memory and
// core omitempty, so a zero is left out, as HAMi writes it.
func SoftEntry(uuid string, memMiB int64, cores int32) RuntimeEntry {
	e := RuntimeEntry{UUID: uuid}
	if memMiB != 0 {
		e.Memory = &memMiB
	}
	if cores != 0 {
		e.Core = &cores
	}
	return e
}

// EncodeRuntimeInfo renders huawei.com/<commonWord>: the entries, one per
// card in container order, as a JSON list.
func EncodeRuntimeInfo(entries []RuntimeEntry) string {
	if entries == nil {
		entries = []RuntimeEntry{}
	}
	s, err := json.Marshal(entries)
	if err != nil {
		// A slice of plain structs always marshals.
		return "[]"
	}
	return string(s)
}

// runtimeEntryJSON is what DecodeRuntimeInfo reads of an entry, its
// numbers by the rule of wireint.
type runtimeEntryJSON struct {
	UUID   string       `json:"UUID"`
	Temp   string       `json:"temp"`
	Memory *wireint.Int `json:"memory"`
	Core   *wireint.Int `json:"core"`
}

// runtimeInfoWant ends every DecodeRuntimeInfo error.
const runtimeInfoWant = "want a JSON list of {UUID, temp} or {UUID, memory, core}"

// DecodeRuntimeInfo reads huawei.com/<commonWord>. Memory and core are
// integers (core 32-bit) written as strconv.FormatInt writes them.
func DecodeRuntimeInfo(value string) ([]RuntimeEntry, error) {
	var in []runtimeEntryJSON
	if err := json.Unmarshal([]byte(value), &in); err != nil {
		return nil, fmt.Errorf("%s: %w", runtimeInfoWant, err)
	}
	if in == nil {
		return nil, nil
	}
	out := make([]RuntimeEntry, len(in))
	for i, e := range in {
		out[i] = RuntimeEntry{UUID: e.UUID, Temp: e.Temp}
		if e.Memory != nil {
			m := int64(*e.Memory)
			out[i].Memory = &m
		}
		if e.Core != nil {
			if *e.Core < math.MinInt32 || *e.Core > math.MaxInt32 {
				return nil, fmt.Errorf("%s: entry %d: core=%d: want a 32-bit integer", runtimeInfoWant, i, *e.Core)
			}
			c := int32(*e.Core)
			out[i].Core = &c
		}
	}
	return out, nil
}
