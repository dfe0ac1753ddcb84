package vgpu

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// cardSpec is one registered card.
type cardSpec struct {
	uuid       string
	typ        string
	count      int32
	memMiB     int64
	coresTotal int32
	numa       int32
	healthy    bool
	mode       string
}

// inventory is a node's decoded registration.
type inventory struct {
	source string
	cards  []cardSpec
	// links is the n x n pair score matrix (row-major), nil when the node
	// publishes none or it cannot be read.
	links []int32
}

// handshakeDeleted reports whether upstream's scheduler marked the node
// agent gone.
func handshakeDeleted(v string) bool { return strings.HasPrefix(v, "Deleted") }

// decodeInventory reads volcano.sh/node-vgpu-register, or HAMi's
// registration when the node has only that, and HAMi's link scores.
func (b *Backend) decodeInventory(node *v1.Node) (*inventory, error) {
	a := node.Annotations
	if handshakeDeleted(a[AnnotationHandshake]) {
		klog.V(2).InfoS("vGPU node agent marked deleted by the handshake; the node's vGPUs are unavailable",
			"node", node.Name, "annotation", AnnotationHandshake, "value", a[AnnotationHandshake])
		return nil, nil
	}
	var inv *inventory
	var err error
	if v, ok := a[AnnotationRegister]; ok {
		inv, err = decodeVolcanoRegister(v)
	} else if v, ok := a[AnnotationHAMiRegister]; ok {
		inv, err = decodeHAMiRegister(v)
	} else {
		return nil, nil
	}
	if err != nil || inv == nil {
		return nil, err
	}
	if s, ok := a[AnnotationHAMiScore]; ok && s != "" {
		links, err := decodeScores(s, inv.cards)
		if err != nil {
			klog.ErrorS(err, "vGPU link scores unreadable; topology-aware placement is off for the node", "node", node.Name)
		} else {
			inv.links = links
		}
	}
	return inv, nil
}

// decodeVolcanoRegister reads "UUID,count,devmemMiB,type,health[,mode]:"
// entries. An empty value registers no card.
func decodeVolcanoRegister(value string) (*inventory, error) {
	inv := &inventory{source: AnnotationRegister}
	rest := value
	for i := 0; rest != ""; i++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ":")
		if entry == "" && rest == "" {
			break
		}
		f := strings.Split(entry, ",")
		if len(f) != 5 && len(f) != 6 {
			return nil, fmt.Errorf("annotation %s card %d %q: want UUID,count,devmemMiB,type,health,mode", AnnotationRegister, i, entry)
		}
		mode := ""
		if len(f) == 6 {
			mode = f[5]
		}
		c, err := newCardSpec(f[0], f[1], f[2], "", f[3], "", f[4], mode)
		if err != nil {
			return nil, fmt.Errorf("annotation %s card %d %q: %w", AnnotationRegister, i, entry, err)
		}
		inv.cards = append(inv.cards, c)
	}
	return checkCards(inv, AnnotationRegister)
}

// hamiDevice is one entry of HAMi's JSON registration.
type hamiDevice struct {
	ID      string `json:"id"`
	Count   *int64 `json:"count"`
	Devmem  *int64 `json:"devmem"`
	Devcore int64  `json:"devcore"`
	Type    string `json:"type"`
	Numa    int64  `json:"numa"`
	Mode    string `json:"mode"`
	Health  *bool  `json:"health"`
}

// decodeHAMiRegister reads HAMi's JSON list, or its older
// "id,count,devmem,devcore,type,numa,health[,index,mode]:" form.
func decodeHAMiRegister(value string) (*inventory, error) {
	inv := &inventory{source: AnnotationHAMiRegister}
	if t := strings.TrimSpace(value); strings.HasPrefix(t, "[") {
		var devs []hamiDevice
		if err := json.Unmarshal([]byte(t), &devs); err != nil {
			return nil, fmt.Errorf("annotation %s: want a JSON list of devices: %w", AnnotationHAMiRegister, err)
		}
		for i, d := range devs {
			if d.Count == nil || d.Devmem == nil || d.Health == nil {
				return nil, fmt.Errorf("annotation %s device %d (%q): id, count, devmem and health are required",
					AnnotationHAMiRegister, i, d.ID)
			}
			c, err := newCardSpec(d.ID, strconv.FormatInt(*d.Count, 10), strconv.FormatInt(*d.Devmem, 10),
				strconv.FormatInt(d.Devcore, 10), d.Type, strconv.FormatInt(d.Numa, 10), strconv.FormatBool(*d.Health), d.Mode)
			if err != nil {
				return nil, fmt.Errorf("annotation %s device %d: %w", AnnotationHAMiRegister, i, err)
			}
			inv.cards = append(inv.cards, c)
		}
		return checkCards(inv, AnnotationHAMiRegister)
	}
	rest := value
	for i := 0; rest != ""; i++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ":")
		if entry == "" && rest == "" {
			break
		}
		f := strings.Split(entry, ",")
		if len(f) != 7 && len(f) != 9 {
			return nil, fmt.Errorf("annotation %s device %d %q: want id,count,devmem,devcore,type,numa,health[,index,mode]",
				AnnotationHAMiRegister, i, entry)
		}
		mode := ""
		if len(f) == 9 {
			mode = f[8]
		}
		c, err := newCardSpec(f[0], f[1], f[2], f[3], f[4], f[5], f[6], mode)
		if err != nil {
			return nil, fmt.Errorf("annotation %s device %d %q: %w", AnnotationHAMiRegister, i, entry, err)
		}
		inv.cards = append(inv.cards, c)
	}
	return checkCards(inv, AnnotationHAMiRegister)
}

// newCardSpec validates one card's fields ("" devcore means 100, "" numa 0).
func newCardSpec(uuid, count, mem, cores, typ, numa, health, mode string) (cardSpec, error) {
	c := cardSpec{uuid: uuid, typ: typ, coresTotal: fullCores}
	if uuid == "" || strings.ContainsAny(uuid, ",:;[] ") {
		return c, fmt.Errorf("UUID %q: want a non-empty ID without , : ; [ ] or spaces", uuid)
	}
	n, err := strconv.ParseInt(count, 10, 32)
	if err != nil || n < 0 || n > MaxShareCount {
		return c, fmt.Errorf("card %s: count=%q: want a whole number in [0, %d]", uuid, count, MaxShareCount)
	}
	c.count = int32(n)
	m, err := strconv.ParseInt(mem, 10, 64)
	if err != nil || m <= 0 || m > MaxMemoryMiB {
		return c, fmt.Errorf("card %s: devmem=%q: want MiB in [1, %d]", uuid, mem, MaxMemoryMiB)
	}
	c.memMiB = m
	if cores != "" && cores != "0" {
		v, err := strconv.ParseInt(cores, 10, 32)
		if err != nil || v < 0 || v > 100*fullCores {
			return c, fmt.Errorf("card %s: devcore=%q: want a whole number in [0, %d]", uuid, cores, 100*fullCores)
		}
		c.coresTotal = int32(v)
	}
	if numa != "" {
		v, err := strconv.ParseInt(numa, 10, 32)
		if err != nil || v < -1 || v > 1024 {
			return c, fmt.Errorf("card %s: numa=%q: want a whole number in [-1, 1024]", uuid, numa)
		}
		c.numa = int32(v)
	}
	h, err := strconv.ParseBool(health)
	if err != nil {
		return c, fmt.Errorf("card %s: health=%q: want true or false", uuid, health)
	}
	c.healthy = h
	switch mode {
	case "", ModeHAMiCore:
		c.mode = ModeHAMiCore
	case ModeMIG, ModeMPS:
		c.mode = mode
	default:
		return c, fmt.Errorf("card %s: mode=%q: want %s, %s, %s or nothing", uuid, mode, ModeHAMiCore, ModeMIG, ModeMPS)
	}
	return c, nil
}

// checkCards rejects duplicate UUIDs and too many cards; a registration
// without cards is no inventory.
func checkCards(inv *inventory, key string) (*inventory, error) {
	if len(inv.cards) == 0 {
		return nil, nil
	}
	if len(inv.cards) > MaxCards {
		return nil, fmt.Errorf("annotation %s: %d cards: want at most %d", key, len(inv.cards), MaxCards)
	}
	for i := range inv.cards {
		for j := 0; j < i; j++ {
			if inv.cards[i].uuid == inv.cards[j].uuid {
				return nil, fmt.Errorf("annotation %s: card UUID %s registered twice (cards %d and %d)", key, inv.cards[i].uuid, j, i)
			}
		}
	}
	return inv, nil
}

// deviceScore is one entry of hami.io/node-nvidia-score.
type deviceScore struct {
	UUID  string           `json:"uuid"`
	Score map[string]int64 `json:"score"`
}

// decodeScores reads the link scores into an n x n matrix by card index;
// pairs the node does not list score 0, UUIDs of other cards are ignored.
func decodeScores(value string, cards []cardSpec) ([]int32, error) {
	var list []deviceScore
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON list of {uuid, score}: %w", AnnotationHAMiScore, err)
	}
	index := make(map[string]int, len(cards))
	for i := range cards {
		index[cards[i].uuid] = i
	}
	n := len(cards)
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
			if s < 0 || s > 1<<20 {
				return nil, fmt.Errorf("annotation %s: score %s->%s=%d: want 0 to %d", AnnotationHAMiScore, e.UUID, other, s, 1<<20)
			}
			links[i*n+j] = int32(s)
		}
	}
	return links, nil
}
