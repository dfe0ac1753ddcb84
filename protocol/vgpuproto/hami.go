package vgpuproto

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// hamiDevice is one entry of HAMi's JSON registration (HAMi
// pkg/device.DeviceInfo as its NVIDIA device plugin marshals it).
// Its numbers are read by the rule of the comma form (wireint.Int).
type hamiDevice struct {
	ID      string       `json:"id"`
	Count   *wireint.Int `json:"count"`
	Devmem  *wireint.Int `json:"devmem"`
	Devcore wireint.Int  `json:"devcore"`
	Type    string       `json:"type"`
	Numa    wireint.Int  `json:"numa"`
	Mode    string       `json:"mode"`
	// Health is false when absent: HAMi marshals DeviceInfo with
	// "health,omitempty", so an unhealthy card has no health field.
	Health bool `json:"health"`
}

// DecodeHAMiRegister reads hami.io/node-nvidia-register: HAMi's JSON list
// {id, index, count, devmem, devcore, type, numa, mode, health} (id, count
// and devmem required; a card without health is unhealthy, as HAMi omits
// false), or its older
// "id,count,devmem,devcore,type,numa,health[,index,mode]:" form. The index
// is not read: cards are indexed in order. The limits and the empty
// registration are as for DecodeRegister.
func DecodeHAMiRegister(value string) ([]Card, error) {
	if t := strings.TrimSpace(value); strings.HasPrefix(t, "[") {
		return decodeHAMiJSON(t)
	}
	return decodeEntries(value, AnnotationHAMiRegister, "device", func(f []string) (Card, error) {
		if len(f) != 7 && len(f) != 9 {
			return Card{}, fmt.Errorf("want id,count,devmem,devcore,type,numa,health[,index,mode]")
		}
		mode := ""
		if len(f) == 9 {
			mode = f[8]
		}
		return parseCard(f[0], f[1], f[2], f[3], f[4], f[5], f[6], mode)
	})
}

func decodeHAMiJSON(value string) ([]Card, error) {
	var devs []hamiDevice
	if err := json.Unmarshal([]byte(value), &devs); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON list of devices: %w", AnnotationHAMiRegister, err)
	}
	cards := make([]Card, 0, len(devs))
	for i, d := range devs {
		if d.Count == nil || d.Devmem == nil {
			return nil, fmt.Errorf("annotation %s device %d (%q): id, count and devmem are required",
				AnnotationHAMiRegister, i, d.ID)
		}
		c, err := parseCard(d.ID, itoa(*d.Count), itoa(*d.Devmem), itoa(d.Devcore), d.Type, itoa(d.Numa),
			strconv.FormatBool(d.Health), d.Mode)
		if err != nil {
			return nil, fmt.Errorf("annotation %s device %d: %w", AnnotationHAMiRegister, i, err)
		}
		cards = append(cards, c)
	}
	return checkCards(cards, AnnotationHAMiRegister)
}

// itoa writes a JSON number back as the comma form spells it, for
// parseCard to check.
func itoa(n wireint.Int) string { return strconv.FormatInt(int64(n), 10) }

// deviceScore is one entry of hami.io/node-nvidia-score (HAMi
// pkg/device/nvidia DeviceListScore).
type deviceScore struct {
	UUID  string                 `json:"uuid"`
	Score map[string]wireint.Int `json:"score"`
}

// DecodeScores reads hami.io/node-nvidia-score into an n x n matrix
// (row-major) over uuids, the node's cards in index order: entry i*n+j is
// the score from card i to card j. Pairs the value does not list score 0,
// as does a card with itself; UUIDs not in uuids are ignored. A score
// between two of the cards must be in [0, MaxLinkScore].
func DecodeScores(value string, uuids []string) ([]int32, error) {
	var list []deviceScore
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON list of {uuid, score}: %w", AnnotationHAMiScore, err)
	}
	index := make(map[string]int, len(uuids))
	for i, u := range uuids {
		index[u] = i
	}
	n := len(uuids)
	links := make([]int32, n*n)
	for _, e := range list {
		i, ok := index[e.UUID]
		if !ok {
			continue
		}
		for other, s := range e.Score {
			j, ok := index[other]
			if !ok || j == i {
				continue
			}
			if s < 0 || s > MaxLinkScore {
				return nil, fmt.Errorf("annotation %s: score %s->%s=%d: want 0 to %d", AnnotationHAMiScore, e.UUID, other, s, MaxLinkScore)
			}
			links[i*n+j] = int32(s)
		}
	}
	return links, nil
}

// EncodeScores renders hami.io/node-nvidia-score as HAMi's NVIDIA device
// plugin writes it (pkg/device-plugin/nvidiadevice/nvinternal/plugin/
// register.go, the JSON of pkg/device/nvidia ListDeviceScore): one
// {uuid, score} per card with the score to every other card. scores is
// the n x n matrix over uuids (row-major), as DecodeScores returns it.
func EncodeScores(uuids []string, scores []int32) (string, error) {
	n := len(uuids)
	if len(scores) != n*n {
		return "", fmt.Errorf("annotation %s: %d scores for %d cards: want %d", AnnotationHAMiScore, len(scores), n, n*n)
	}
	list := make([]deviceScore, n)
	for i, u := range uuids {
		list[i] = deviceScore{UUID: u, Score: make(map[string]wireint.Int, n-1)}
		for j, v := range uuids {
			if j != i {
				list[i].Score[v] = wireint.Int(scores[i*n+j])
			}
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("annotation %s: %w", AnnotationHAMiScore, err)
	}
	return string(b), nil
}
