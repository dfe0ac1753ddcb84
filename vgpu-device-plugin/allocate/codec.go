package allocate

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits on decoded values.
const (
	maxCardsPerContainer = 256
	maxMemory            = int64(1) << 40
	maxCores             = 100000
)

// Device is one card of a container's allocation entry.
type Device struct {
	// UUID is the card's UUID.
	UUID string
	// MIGGroup and MIGPos name a MIG instance; MIGPos is -1 for a shared card.
	MIGGroup string
	MIGPos   int
	// Type is the device type ("NVIDIA").
	Type string
	// Mem is the memory in the annotations' unit.
	Mem int64
	// Cores is the SM percentage.
	Cores int32
}

// IsMIG reports whether the device is a MIG instance.
func (d Device) IsMIG() bool { return d.MIGPos >= 0 }

// Decode reads an allocation annotation: containers separated by ";", cards
// by ":" (a trailing ":" is allowed), each card "UUID[group-pos],type,mem,cores".
func Decode(value string) ([][]Device, error) {
	if value == "" {
		return nil, nil
	}
	parts := strings.Split(value, ";")
	out := make([][]Device, len(parts))
	for i, part := range parts {
		if part == "" {
			continue
		}
		entries := strings.Split(strings.TrimSuffix(part, ":"), ":")
		if len(entries) > maxCardsPerContainer {
			return nil, fmt.Errorf("container entry %d has %d cards, at most %d allowed", i, len(entries), maxCardsPerContainer)
		}
		for _, e := range entries {
			d, err := decodeDevice(e)
			if err != nil {
				return nil, fmt.Errorf("container entry %d card %q: %w", i, e, err)
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}

func decodeDevice(e string) (Device, error) {
	f := strings.Split(e, ",")
	if len(f) != 4 {
		return Device{}, fmt.Errorf("want UUID,type,mem,cores")
	}
	d := Device{UUID: f[0], MIGPos: -1, Type: f[1]}
	if id, suffix, ok := strings.Cut(f[0], "["); ok {
		body, closed := strings.CutSuffix(suffix, "]")
		i := strings.LastIndexByte(body, '-')
		if !closed || i <= 0 {
			return d, fmt.Errorf("MIG instance %q: want UUID[group-position]", f[0])
		}
		pos, err := strconv.Atoi(body[i+1:])
		if err != nil || pos < 0 || pos >= 64 {
			return d, fmt.Errorf("MIG instance %q: position must be 0..63", f[0])
		}
		d.UUID, d.MIGGroup, d.MIGPos = id, body[:i], pos
	}
	if d.UUID == "" {
		return d, fmt.Errorf("empty UUID")
	}
	mem, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || mem < 0 || mem > maxMemory {
		return d, fmt.Errorf("memory %q: want a whole number in [0, %d]", f[2], maxMemory)
	}
	cores, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || cores < 0 || cores > maxCores {
		return d, fmt.Errorf("cores %q: want a whole number in [0, %d]", f[3], maxCores)
	}
	d.Mem, d.Cores = mem, int32(cores)
	return d, nil
}

// Encode writes containers back in the annotation format.
func Encode(containers [][]Device) string {
	var b strings.Builder
	for i, c := range containers {
		if i > 0 {
			b.WriteByte(';')
		}
		for _, d := range c {
			b.WriteString(d.UUID)
			if d.IsMIG() {
				fmt.Fprintf(&b, "[%s-%d]", d.MIGGroup, d.MIGPos)
			}
			fmt.Fprintf(&b, ",%s,%d,%d:", d.Type, d.Mem, d.Cores)
		}
	}
	return b.String()
}

// nextPending returns the index of the first container entry with an NVIDIA
// card, or -1.
func nextPending(containers [][]Device) int {
	for i, c := range containers {
		for _, d := range c {
			if d.Type == DeviceType {
				return i
			}
		}
	}
	return -1
}

// consume returns the annotation value with the NVIDIA cards of entry i
// removed, as upstream's EraseNextDeviceTypeFromAnnotation does.
func consume(containers [][]Device, i int) string {
	out := make([][]Device, len(containers))
	copy(out, containers)
	var kept []Device
	for _, d := range containers[i] {
		if d.Type != DeviceType {
			kept = append(kept, d)
		}
	}
	out[i] = kept
	return Encode(out)
}
