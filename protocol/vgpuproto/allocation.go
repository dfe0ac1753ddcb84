package vgpuproto

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// Device is one card of a container's allocation entry.
type Device struct {
	// UUID is the card's UUID.
	UUID string
	// MIGGroup and MIGPos name a MIG instance of the card: the geometry
	// group and the instance's position in it. MIGPos is -1 for a shared
	// card.
	MIGGroup string
	MIGPos   int
	// Type is the device type (DeviceTypeNVIDIA; HAMi records other
	// vendors' devices in the same value).
	Type string
	// Mem is the memory: MiB, or the agent's gpuMemoryFactor units.
	Mem int64
	// Cores is the SM percentage.
	Cores int32
}

// IsMIG reports whether the device is a MIG instance.
func (d Device) IsMIG() bool { return d.MIGPos >= 0 }

// DecodeAllocation reads volcano.sh/vgpu-ids-new or
// volcano.sh/devices-to-allocate: containers separated by ";", cards by ":"
// (a trailing ":" is allowed), each card "UUID[group-pos],type,mem,cores".
// It returns one slice per container entry (nil for an entry without
// cards), and nil for "". Each entry lists at most MaxCardsPerContainer
// cards, each UUID once; mem is in [0, MaxMemoryMiB], cores in [0,
// MaxCores] and a MIG position in [0, MaxMIGPositions). Errors start with
// "container entry <i>". Whether the cards exist is the caller's business.
func DecodeAllocation(value string) ([][]Device, error) {
	if value == "" {
		return nil, nil
	}
	out := make([][]Device, strings.Count(value, ";")+1)
	rest := value
	for i := range out {
		var part string
		part, rest, _ = strings.Cut(rest, ";")
		cards, err := decodeContainer(part)
		if err != nil {
			return nil, fmt.Errorf("container entry %d %w", i, err)
		}
		out[i] = cards
	}
	return out, nil
}

// decodeContainer reads one container entry; errors continue the sentence
// "container entry <i> ...".
func decodeContainer(part string) ([]Device, error) {
	if part == "" {
		return nil, nil
	}
	n := strings.Count(strings.TrimSuffix(part, ":"), ":") + 1
	if n > MaxCardsPerContainer {
		return nil, fmt.Errorf("has %d cards: want at most %d", n, MaxCardsPerContainer)
	}
	out := make([]Device, 0, n)
	for rest := part; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, ":")
		d, err := decodeDevice(entry)
		if err != nil {
			return nil, fmt.Errorf("card %q: %w", entry, err)
		}
		for _, prev := range out {
			if prev.UUID == d.UUID {
				return nil, fmt.Errorf("card %q: UUID %s listed twice: want each card once per container", entry, d.UUID)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// decodeDevice reads one "UUID[group-pos],type,mem,cores" card.
func decodeDevice(e string) (Device, error) {
	f := strings.Split(e, ",")
	if len(f) != 4 {
		return Device{}, fmt.Errorf("want UUID,type,mem,cores")
	}
	d := Device{UUID: f[0], MIGPos: -1, Type: f[1]}
	if id, suffix, ok := strings.Cut(f[0], "["); ok {
		body, closed := strings.CutSuffix(suffix, "]")
		i := strings.LastIndexByte(body, '-')
		if !closed || i <= 0 || !validID(body[:i]) {
			return d, fmt.Errorf("MIG instance %q: want UUID[group-position]", f[0])
		}
		pos, ok := wireint.Parse(body[i+1:], 0, MaxMIGPositions-1)
		if !ok {
			return d, fmt.Errorf("MIG instance %q: position %q: want a whole number in [0, %d]", f[0], body[i+1:], MaxMIGPositions-1)
		}
		d.UUID, d.MIGGroup, d.MIGPos = id, body[:i], int(pos)
	}
	if !validID(d.UUID) {
		return d, fmt.Errorf("UUID %q: want a non-empty ID without , : ; [ ] or spaces", d.UUID)
	}
	if d.Type == "" {
		return d, fmt.Errorf("type is empty: want a device type such as %s", DeviceTypeNVIDIA)
	}
	mem, ok := wireint.Parse(f[2], 0, MaxMemoryMiB)
	if !ok {
		return d, fmt.Errorf("memory %q: want a whole number in [0, %d]", f[2], MaxMemoryMiB)
	}
	cores, ok := wireint.Parse(f[3], 0, MaxCores)
	if !ok {
		return d, fmt.Errorf("cores %q: want a whole number in [0, %d]", f[3], MaxCores)
	}
	d.Mem, d.Cores = mem, int32(cores)
	return d, nil
}

// AppendDevice appends one card as DecodeAllocation reads it, with its
// terminating ":".
func AppendDevice(buf []byte, d Device) []byte {
	buf = append(buf, d.UUID...)
	if d.IsMIG() {
		buf = append(buf, '[')
		buf = append(buf, d.MIGGroup...)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(d.MIGPos), 10)
		buf = append(buf, ']')
	}
	buf = append(buf, ',')
	buf = append(buf, d.Type...)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, d.Mem, 10)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, int64(d.Cores), 10)
	return append(buf, ':')
}

// EncodeAllocation renders containers as DecodeAllocation reads them: the
// entries separated by ";", an empty container as an empty entry.
func EncodeAllocation(containers [][]Device) string {
	var buf []byte
	for i, c := range containers {
		if i > 0 {
			buf = append(buf, ';')
		}
		for _, d := range c {
			buf = AppendDevice(buf, d)
		}
	}
	return string(buf)
}

// NextPending returns the index of the first container entry with an
// NVIDIA card, the one the node agent serves next, or -1.
func NextPending(containers [][]Device) int {
	for i, c := range containers {
		for _, d := range c {
			if d.Type == DeviceTypeNVIDIA {
				return i
			}
		}
	}
	return -1
}

// Consume returns volcano.sh/devices-to-allocate with the NVIDIA cards of
// entry i removed, as upstream's EraseNextDeviceTypeFromAnnotation does;
// other vendors' cards stay.
func Consume(containers [][]Device, i int) string {
	out := make([][]Device, len(containers))
	copy(out, containers)
	var kept []Device
	for _, d := range containers[i] {
		if d.Type != DeviceTypeNVIDIA {
			kept = append(kept, d)
		}
	}
	out[i] = kept
	return EncodeAllocation(out)
}
