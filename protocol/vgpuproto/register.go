package vgpuproto

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// Card is one registered card, from either dialect of the registration.
type Card struct {
	// UUID is the card's UUID: non-empty, without , : ; [ ] or spaces.
	UUID string
	// Count is how many pods may share the card (deviceSplitCount).
	Count int32
	// MemMiB is the card's memory (devmem): MiB, or the agent's
	// gpuMemoryFactor units when it writes those.
	MemMiB int64
	// Cores is the card's SMs in percent (devcore); DefaultCores when the
	// registration has none, as volcano.sh's format never does.
	Cores int32
	// Type is the card's type, like "NVIDIA-Tesla T4".
	Type string
	// NUMA is the card's NUMA node; 0 when the format has none.
	NUMA int32
	// Healthy is the card's health.
	Healthy bool
	// Mode is ModeHAMiCore, ModeMIG or ModeMPS; a registration without a
	// mode is ModeHAMiCore.
	Mode string
}

// AgentDeleted reports whether a volcano.sh/node-vgpu-handshake value says
// upstream's scheduler marked the node agent gone ("Deleted_<time>"): such
// a node has no usable vGPUs.
func AgentDeleted(handshake string) bool { return strings.HasPrefix(handshake, handshakeDeleted) }

// DecodeRegister reads volcano.sh/node-vgpu-register:
// "UUID,count,devmem,type,health[,mode[,numa]]:" per card.
// volcano-vgpu-device-plugin's EncodeNodeDevices writes the first five
// fields, newer ones the mode; this project's agent adds the card's NUMA
// node as a seventh, which upstream's readers never look at (Volcano
// v1.10's decodeNodeDevices reads fields 0 to 4 only, newer ones also 5).
// The NUMA node is checked as in HAMi's registration: a whole number in
// [-1, MaxNUMA], -1 meaning unknown; a card without one is on NUMA 0. An
// empty value, or one without cards, registers nothing (nil, nil). At most
// MaxCards cards, each UUID once.
func DecodeRegister(value string) ([]Card, error) {
	return decodeEntries(value, AnnotationRegister, "card", func(f []string) (Card, error) {
		if len(f) < 5 || len(f) > 7 {
			return Card{}, fmt.Errorf("want UUID,count,devmemMiB,type,health[,mode[,numa]]")
		}
		mode, numa := "", ""
		if len(f) >= 6 {
			mode = f[5]
		}
		if len(f) == 7 {
			if numa = f[6]; numa == "" {
				return Card{}, fmt.Errorf("card %s: numa=\"\": want a whole number in [-1, %d]", f[0], MaxNUMA)
			}
		}
		return parseCard(f[0], f[1], f[2], "", f[3], numa, f[4], mode)
	})
}

// RegisteredWithNUMA reports whether every card of a
// volcano.sh/node-vgpu-register value has the seventh field, the card's
// NUMA node, which only this project's agent writes (EncodeRegister):
// volcano-vgpu-device-plugin writes five or six fields. Readers use it to
// tell what the node's agent serves; it checks nothing else of the value.
func RegisteredWithNUMA(value string) bool {
	cards := 0
	for _, entry := range strings.Split(value, ":") {
		if entry == "" {
			continue
		}
		if strings.Count(entry, ",") != 6 {
			return false
		}
		cards++
	}
	return cards > 0
}

// decodeEntries reads the ":"-terminated, comma-separated card entries of
// the annotation key (each called what in errors) with card, then checks
// the cards together.
func decodeEntries(value, key, what string, card func(fields []string) (Card, error)) ([]Card, error) {
	var cards []Card
	rest := value
	for i := 0; rest != ""; i++ {
		var entry string
		entry, rest, _ = strings.Cut(rest, ":")
		if entry == "" && rest == "" {
			break
		}
		c, err := card(strings.Split(entry, ","))
		if err != nil {
			return nil, fmt.Errorf("annotation %s %s %d %q: %w", key, what, i, entry, err)
		}
		cards = append(cards, c)
	}
	return checkCards(cards, key)
}

// EncodeRegister renders cards as volcano.sh/node-vgpu-register with all
// seven fields (see DecodeRegister). Cores are not part of this format.
func EncodeRegister(cards []Card) string {
	var b strings.Builder
	for _, c := range cards {
		b.WriteString(c.UUID)
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(int(c.Count)))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(c.MemMiB, 10))
		b.WriteByte(',')
		b.WriteString(c.Type)
		b.WriteByte(',')
		b.WriteString(strconv.FormatBool(c.Healthy))
		b.WriteByte(',')
		b.WriteString(c.Mode)
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(int(c.NUMA)))
		b.WriteByte(':')
	}
	return b.String()
}

// MIGGeometry is one entry of volcano.sh/node-vgpu-mig-geometry.
type MIGGeometry struct {
	// UUID is the mig-mode card.
	UUID string
	// Group is the catalogue group its MIG instances form; "" for none.
	Group string
}

// EncodeMIGGeometry renders volcano.sh/node-vgpu-mig-geometry: "UUID,group:"
// per mig-mode card.
func EncodeMIGGeometry(cards []MIGGeometry) string {
	var b strings.Builder
	for _, c := range cards {
		b.WriteString(c.UUID)
		b.WriteByte(',')
		b.WriteString(c.Group)
		b.WriteByte(':')
	}
	return b.String()
}

// validID reports whether s can stand as a UUID (or MIG group) in the
// registration and allocation formats, whose separators it must not hold.
func validID(s string) bool { return s != "" && !strings.ContainsAny(s, ",:;[] ") }

// parseCard validates one card's fields, as written in either dialect
// (numbers by the rule of protocol/internal/wireint; cores "" or 0 mean
// DefaultCores, "" numa 0, "" mode ModeHAMiCore).
func parseCard(uuid, count, mem, cores, typ, numa, health, mode string) (Card, error) {
	c := Card{UUID: uuid, Type: typ, Cores: DefaultCores}
	if !validID(uuid) {
		return c, fmt.Errorf("UUID %q: want a non-empty ID without , : ; [ ] or spaces", uuid)
	}
	n, ok := wireint.Parse(count, 0, MaxShareCount)
	if !ok {
		return c, fmt.Errorf("card %s: count=%q: want a whole number in [0, %d]", uuid, count, MaxShareCount)
	}
	c.Count = int32(n)
	m, ok := wireint.Parse(mem, 1, MaxMemoryMiB)
	if !ok {
		return c, fmt.Errorf("card %s: devmem=%q: want MiB in [1, %d]", uuid, mem, MaxMemoryMiB)
	}
	c.MemMiB = m
	if cores != "" {
		v, ok := wireint.Parse(cores, 0, MaxCores)
		if !ok {
			return c, fmt.Errorf("card %s: devcore=%q: want a whole number in [0, %d]", uuid, cores, MaxCores)
		}
		if v != 0 {
			c.Cores = int32(v)
		}
	}
	if numa != "" {
		v, ok := wireint.Parse(numa, -1, MaxNUMA)
		if !ok {
			return c, fmt.Errorf("card %s: numa=%q: want a whole number in [-1, %d]", uuid, numa, MaxNUMA)
		}
		c.NUMA = int32(v)
	}
	h, err := strconv.ParseBool(health)
	if err != nil {
		return c, fmt.Errorf("card %s: health=%q: want true or false", uuid, health)
	}
	c.Healthy = h
	switch mode {
	case "", ModeHAMiCore:
		c.Mode = ModeHAMiCore
	case ModeMIG, ModeMPS:
		c.Mode = mode
	default:
		return c, fmt.Errorf("card %s: mode=%q: want %s, %s, %s or nothing", uuid, mode, ModeHAMiCore, ModeMIG, ModeMPS)
	}
	return c, nil
}

// checkCards refuses duplicate UUIDs and too many cards; a registration
// without cards registers nothing.
func checkCards(cards []Card, key string) ([]Card, error) {
	if len(cards) == 0 {
		return nil, nil
	}
	if len(cards) > MaxCards {
		return nil, fmt.Errorf("annotation %s: %d cards: want at most %d", key, len(cards), MaxCards)
	}
	for i := range cards {
		for j := 0; j < i; j++ {
			if cards[i].UUID == cards[j].UUID {
				return nil, fmt.Errorf("annotation %s: card UUID %s registered twice (cards %d and %d)", key, cards[i].UUID, j, i)
			}
		}
	}
	return cards, nil
}
