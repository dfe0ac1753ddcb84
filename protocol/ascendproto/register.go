package ascendproto

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// RegisteredCard is one card of hami.io/node-register-<commonWord>, with
// the fields of HAMi's device.DeviceInfo that the Ascend device plugin
// fills.
type RegisteredCard struct {
	// ID is the card's UUID; no ",", ":", ";" or spaces.
	ID string
	// Index is the card's position (HAMi counts from 0, contiguously).
	Index int
	// Count is how many vNPUs may share the card.
	Count int32
	// DevmemMiB is the card's memory.
	DevmemMiB int64
	// Devcore is the card's AI cores in template mode, 100 in hami-core mode.
	Devcore int32
	// Type is the commonWord.
	Type string
	// NUMA is the card's NUMA node (HAMi's plugin always writes 0).
	NUMA int
	// Healthy is the card's health.
	Healthy bool
	// NetworkID is custominfo.NetworkID (Ascend910 chips); nil for none.
	NetworkID *int64
}

// deviceInfo is HAMi's device.DeviceInfo JSON. Every key is omitempty
// there, so an absent count, devcore, numa or health is the zero value (an
// unhealthy card is written without "health").
// Its numbers, custominfo's NetworkID included, are read by the rule of
// wireint.
type deviceInfo struct {
	ID         string                     `json:"id,omitempty"`
	Index      wireint.Int                `json:"index,omitempty"`
	Count      wireint.Int                `json:"count,omitempty"`
	Devmem     wireint.Int                `json:"devmem,omitempty"`
	Devcore    wireint.Int                `json:"devcore,omitempty"`
	Type       string                     `json:"type,omitempty"`
	Numa       wireint.Int                `json:"numa,omitempty"`
	Health     bool                       `json:"health,omitempty"`
	CustomInfo map[string]json.RawMessage `json:"custominfo,omitempty"`
}

// AgentDeleted reports whether a hami.io/node-handshake-<commonWord> value
// says HAMi's scheduler marked the node agent gone (HandshakeDeleted plus
// the time): the node's cards of that type are unavailable.
func AgentDeleted(handshake string) bool { return strings.HasPrefix(handshake, "Deleted") }

// networkIDKey is the custominfo key of an Ascend910 card's network group.
const networkIDKey = "NetworkID"

// EncodeRegister renders the registration the way HAMi's Ascend device
// plugin marshals it: a JSON list of device.DeviceInfo. It refuses cards
// DecodeRegister would refuse.
func EncodeRegister(cards []RegisteredCard) (string, error) {
	out := make([]deviceInfo, 0, len(cards))
	for i, c := range cards {
		d := deviceInfo{ID: c.ID, Index: wireint.Int(c.Index), Count: wireint.Int(c.Count), Devmem: wireint.Int(c.DevmemMiB),
			Devcore: wireint.Int(c.Devcore), Type: c.Type, Numa: wireint.Int(c.NUMA), Health: c.Healthy}
		if c.NetworkID != nil {
			d.CustomInfo = map[string]json.RawMessage{networkIDKey: strconv.AppendInt(nil, *c.NetworkID, 10)}
		}
		if _, err := d.card(); err != nil {
			return "", fmt.Errorf("encode registration: device %d: %w", i, err)
		}
		out = append(out, d)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode registration: %w", err)
	}
	return string(raw), nil
}

// DecodeRegister reads hami.io/node-register-<commonWord>: a JSON list of
// HAMi DeviceInfo. An empty value registers nothing (nil, nil). At most
// MaxCards cards, each ID once, each field within the limits. Errors do not
// name the annotation, whose key depends on the chip type; the caller does.
func DecodeRegister(value string) ([]RegisteredCard, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var devs []deviceInfo
	if err := json.Unmarshal([]byte(value), &devs); err != nil {
		return nil, fmt.Errorf("want a JSON list of {id, count, devmem, devcore, type, numa, health}: %w", err)
	}
	if len(devs) > MaxCards {
		return nil, fmt.Errorf("%d cards: want at most %d", len(devs), MaxCards)
	}
	cards := make([]RegisteredCard, 0, len(devs))
	seen := make(map[string]int, len(devs))
	for i, d := range devs {
		c, err := d.card()
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		if j, dup := seen[c.ID]; dup {
			return nil, fmt.Errorf("card %s registered twice (devices %d and %d)", c.ID, j, i)
		}
		seen[c.ID] = i
		cards = append(cards, c)
	}
	return cards, nil
}

// card checks one entry against the limits and returns it as a
// RegisteredCard.
func (d deviceInfo) card() (RegisteredCard, error) {
	c := RegisteredCard{ID: d.ID, Type: d.Type, Healthy: d.Health}
	switch {
	case d.ID == "" || strings.ContainsAny(d.ID, ",:; "):
		return c, fmt.Errorf("id %q: want a non-empty ID without , : ; or spaces", d.ID)
	case d.Count < 0 || d.Count > MaxCount:
		return c, fmt.Errorf("card %s: count=%d: want 0 to %d", d.ID, d.Count, MaxCount)
	case d.Devmem <= 0 || int64(d.Devmem) > MaxMemoryMiB:
		return c, fmt.Errorf("card %s: devmem=%d: want MiB in [1, %d]", d.ID, d.Devmem, MaxMemoryMiB)
	case d.Devcore < 0 || d.Devcore > MaxDevcore:
		return c, fmt.Errorf("card %s: devcore=%d: want 0 to %d", d.ID, d.Devcore, MaxDevcore)
	case d.Numa < -1 || d.Numa > MaxNUMA:
		return c, fmt.Errorf("card %s: numa=%d: want -1 to %d", d.ID, d.Numa, MaxNUMA)
	case d.Index < 0 || d.Index > MaxIndex:
		return c, fmt.Errorf("card %s: index=%d: want 0 to %d", d.ID, d.Index, MaxIndex)
	}
	c.Index, c.Count, c.DevmemMiB, c.Devcore, c.NUMA = int(d.Index), int32(d.Count), int64(d.Devmem), int32(d.Devcore), int(d.Numa)
	if v, ok := d.CustomInfo[networkIDKey]; ok {
		id, isWhole := wireint.Parse(string(v), -maxNetworkID, maxNetworkID)
		if !isWhole {
			return c, fmt.Errorf("card %s: custominfo.%s=%s: want a whole number", d.ID, networkIDKey, v)
		}
		c.NetworkID = &id
	}
	return c, nil
}
