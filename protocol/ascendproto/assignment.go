package ascendproto

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// CardAssignment is one card of one container in
// hami.io/<commonWord>-devices-to-allocate and -devices-allocated (HAMi's
// ContainerDevice).
type CardAssignment struct {
	UUID string
	// Type is the commonWord.
	Type string
	// MemMiB is the memory charged (the template's in template mode).
	MemMiB int64
	// Cores is the AI-core percent (hami-core mode; 0 in template mode).
	Cores int32
}

// DecodeAssignments reads a pod-devices value, "UUID,type,memMiB,cores:"
// per card and ";" after every container (the last ";" may be missing),
// into one slice per container: empty for a container without cards, or
// whose cards were consumed. MemMiB is in [1, MaxMemoryMiB], Cores in [0,
// FullCores], and a container lists a card at most once. It checks the
// syntax and the limits only; whether the cards exist on the node, and are
// of the reader's chip type, is the caller's business. Errors start with
// "container <i>" or "empty value".
func DecodeAssignments(value string) ([][]CardAssignment, error) {
	if value == "" {
		return nil, fmt.Errorf("empty value: want \"UUID,type,memMiB,cores:\" per card and \";\" after each container")
	}
	entries := strings.Split(strings.TrimSuffix(value, ";"), ";")
	out := make([][]CardAssignment, len(entries))
	for ctr, entry := range entries {
		if entry == "" {
			continue
		}
		if !strings.HasSuffix(entry, ":") {
			return nil, fmt.Errorf("container %d entry %q: want cards ending in \":\"", ctr, entry)
		}
		for _, card := range strings.Split(strings.TrimSuffix(entry, ":"), ":") {
			a, err := decodeAssignment(card)
			if err != nil {
				return nil, fmt.Errorf("container %d: %w", ctr, err)
			}
			for _, prev := range out[ctr] {
				if prev.UUID == a.UUID {
					return nil, fmt.Errorf("container %d: card %s listed twice", ctr, a.UUID)
				}
			}
			out[ctr] = append(out[ctr], a)
		}
	}
	return out, nil
}

func decodeAssignment(card string) (CardAssignment, error) {
	f := strings.Split(card, ",")
	if len(f) != 4 || f[0] == "" || f[1] == "" {
		return CardAssignment{}, fmt.Errorf("card %q: want UUID,type,memMiB,cores", card)
	}
	mem, ok := wireint.Parse(f[2], 1, MaxMemoryMiB)
	if !ok {
		return CardAssignment{}, fmt.Errorf("card %q: memory %q: want MiB in [1, %d]", card, f[2], MaxMemoryMiB)
	}
	cores, ok := wireint.Parse(f[3], 0, FullCores)
	if !ok {
		return CardAssignment{}, fmt.Errorf("card %q: cores %q: want 0 to %d", card, f[3], FullCores)
	}
	return CardAssignment{UUID: f[0], Type: f[1], MemMiB: mem, Cores: int32(cores)}, nil
}

// EncodeAssignments renders containers the way DecodeAssignments reads
// them (HAMi's EncodePodSingleDevice): ";" after every container, so an
// empty container is just ";".
func EncodeAssignments(containers [][]CardAssignment) string {
	var b strings.Builder
	for _, cards := range containers {
		for _, c := range cards {
			b.WriteString(c.UUID)
			b.WriteByte(',')
			b.WriteString(c.Type)
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(c.MemMiB, 10))
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(int64(c.Cores), 10))
			b.WriteByte(':')
		}
		b.WriteByte(';')
	}
	return b.String()
}

// NextPending returns the first container with cards left, the one the
// device plugin serves next, or -1.
func NextPending(containers [][]CardAssignment) int {
	for i, c := range containers {
		if len(c) > 0 {
			return i
		}
	}
	return -1
}
