package ascendproto

import (
	"encoding/json"
	"fmt"
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

// DecodeRuntimeInfo reads huawei.com/<commonWord>.
func DecodeRuntimeInfo(value string) ([]RuntimeEntry, error) {
	var out []RuntimeEntry
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("want a JSON list of {UUID, temp} or {UUID, memory, core}: %w", err)
	}
	return out, nil
}
