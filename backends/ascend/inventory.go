package ascend

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// registered is one entry of hami.io/node-register-<commonWord>: HAMi's
// device.DeviceInfo as its Ascend device plugin marshals it. HAMi declares
// every field omitempty, so an absent count, devcore, numa or health is the
// zero value (an unhealthy card is written without "health").
type registered struct {
	ID         string         `json:"id"`
	Count      int64          `json:"count"`
	Devmem     int64          `json:"devmem"`
	Devcore    int64          `json:"devcore"`
	Type       string         `json:"type"`
	Numa       int64          `json:"numa"`
	Health     bool           `json:"health"`
	CustomInfo map[string]any `json:"custominfo"`
}

// cardSpec is one decoded card.
type cardSpec struct {
	id         string
	typ        string
	count      int32
	memMiB     int64
	coresTotal int32
	numa       int32
	healthy    bool
	// network is the card's NetworkID (custominfo.NetworkID, Ascend910
	// chips); hasNetwork is false when the card has none.
	network    int64
	hasNetwork bool
}

// decodeRegister reads the JSON list. An empty value or list registers no
// card.
func (b *Backend) decodeRegister(value string) ([]cardSpec, error) {
	key := b.keys.Register
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var devs []registered
	if err := json.Unmarshal([]byte(value), &devs); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON list of {id, count, devmem, devcore, type, numa, health}: %w", key, err)
	}
	if len(devs) > MaxCards {
		return nil, fmt.Errorf("annotation %s: %d cards: want at most %d", key, len(devs), MaxCards)
	}
	cards := make([]cardSpec, 0, len(devs))
	seen := make(map[string]int, len(devs))
	for i, d := range devs {
		c, err := newCardSpec(d)
		if err != nil {
			return nil, fmt.Errorf("annotation %s device %d: %w", key, i, err)
		}
		if j, dup := seen[c.id]; dup {
			return nil, fmt.Errorf("annotation %s: card %s registered twice (devices %d and %d)", key, c.id, j, i)
		}
		seen[c.id] = i
		cards = append(cards, c)
	}
	return cards, nil
}

func newCardSpec(d registered) (cardSpec, error) {
	c := cardSpec{id: d.ID, typ: d.Type, healthy: d.Health}
	switch {
	case d.ID == "" || strings.ContainsAny(d.ID, ",:; "):
		return c, fmt.Errorf("id %q: want a non-empty ID without , : ; or spaces", d.ID)
	case d.Count < 0 || d.Count > MaxCount:
		return c, fmt.Errorf("card %s: count=%d: want 0 to %d", d.ID, d.Count, MaxCount)
	case d.Devmem <= 0 || d.Devmem > MaxMemoryMiB:
		return c, fmt.Errorf("card %s: devmem=%d: want MiB in [1, %d]", d.ID, d.Devmem, MaxMemoryMiB)
	case d.Devcore < 0 || d.Devcore > math.MaxInt16:
		return c, fmt.Errorf("card %s: devcore=%d: want 0 to %d", d.ID, d.Devcore, math.MaxInt16)
	case d.Numa < -1 || d.Numa > 1024:
		return c, fmt.Errorf("card %s: numa=%d: want -1 to 1024", d.ID, d.Numa)
	}
	c.count, c.memMiB, c.coresTotal, c.numa = int32(d.Count), d.Devmem, int32(d.Devcore), int32(d.Numa)
	if v, ok := d.CustomInfo["NetworkID"]; ok {
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
			return c, fmt.Errorf("card %s: custominfo.NetworkID=%v: want a whole number", d.ID, v)
		}
		c.network, c.hasNetwork = int64(f), true
	}
	return c, nil
}
