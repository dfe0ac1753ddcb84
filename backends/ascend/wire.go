package ascend

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// This file holds the node agent's side of the wire format: what HAMi's
// Ascend device plugin writes on the node and reads from the pod. The
// scheduler side (inventory.go, codec.go) decodes and encodes the same
// strings; these helpers exist so that the simulated agent in vnpu/agent
// speaks exactly what this backend reads, and only touch strings.

// Values of hami.io/bind-phase besides BindPhaseAllocating: the device
// plugin writes them once it served every container of the pod (success) or
// refused the allocation (failed).
const (
	BindPhaseSuccess = "success"
	BindPhaseFailed  = "failed"
)

// Handshake values (hami.io/node-handshake-<commonWord>): the agent writes
// HandshakeReported plus the time; HAMi's scheduler writes
// HandshakeRequesting or HandshakeDeleted plus the time. HandshakeLayout is
// the time layout of all three.
const (
	HandshakeReported   = "Reported_"
	HandshakeRequesting = "Requesting_"
	HandshakeDeleted    = "Deleted_"
	HandshakeLayout     = "2006.01.02 15:04:05"
)

// Container environment HAMi's Ascend device plugin returns from Allocate.
const (
	// EnvVisibleDevices lists the physical chip IDs, comma-separated.
	EnvVisibleDevices = "ASCEND_VISIBLE_DEVICES"
	// EnvVNPUSpecs names the template the runtime slices (template mode).
	EnvVNPUSpecs = "ASCEND_VNPU_SPECS"
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

// deviceInfo is HAMi's device.DeviceInfo JSON; every key is omitempty there.
type deviceInfo struct {
	ID         string         `json:"id,omitempty"`
	Index      uint           `json:"index,omitempty"`
	Count      int32          `json:"count,omitempty"`
	Devmem     int64          `json:"devmem,omitempty"`
	Devcore    int32          `json:"devcore,omitempty"`
	Type       string         `json:"type,omitempty"`
	Numa       int            `json:"numa,omitempty"`
	Health     bool           `json:"health,omitempty"`
	CustomInfo map[string]any `json:"custominfo,omitempty"`
}

// EncodeRegister renders the registration value the way HAMi's Ascend
// device plugin marshals it: a JSON list of device.DeviceInfo. It refuses
// cards the scheduler could not decode (bad ID, negative index).
func EncodeRegister(cards []RegisteredCard) (string, error) {
	out := make([]deviceInfo, 0, len(cards))
	for i, c := range cards {
		if c.ID == "" || strings.ContainsAny(c.ID, ",:; ") {
			return "", fmt.Errorf("encode registration: card %d: id %q: want a non-empty ID without , : ; or spaces", i, c.ID)
		}
		if c.Index < 0 {
			return "", fmt.Errorf("encode registration: card %s: index %d: want 0 or more", c.ID, c.Index)
		}
		d := deviceInfo{ID: c.ID, Index: uint(c.Index), Count: c.Count, Devmem: c.DevmemMiB, Devcore: c.Devcore,
			Type: c.Type, Numa: c.NUMA, Health: c.Healthy}
		if c.NetworkID != nil {
			d.CustomInfo = map[string]any{"NetworkID": *c.NetworkID}
		}
		out = append(out, d)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode registration: %w", err)
	}
	return string(raw), nil
}

// CardAssignment is one card of one container in
// hami.io/<commonWord>-devices-to-allocate (HAMi's ContainerDevice).
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
// per card and ";" after every container, into one slice per container
// (empty for a container without cards, or whose cards were consumed). It
// checks the syntax only; whether the cards exist is the caller's business.
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
	mem, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || mem < 0 {
		return CardAssignment{}, fmt.Errorf("card %q: memory %q: want MiB, 0 or more", card, f[2])
	}
	cores, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || cores < 0 {
		return CardAssignment{}, fmt.Errorf("card %q: cores %q: want a percent, 0 or more", card, f[3])
	}
	return CardAssignment{UUID: f[0], Type: f[1], MemMiB: mem, Cores: int32(cores)}, nil
}

// EncodeAssignments renders containers the way DecodeAssignments reads
// them (HAMi's EncodePodSingleDevice): an empty container is just ";".
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

// RuntimeEntry is one entry of huawei.com/<commonWord> (HAMi's RuntimeInfo):
// the card and either its template (template mode; none for a whole card)
// or its memory and core limits (hami-core mode).
type RuntimeEntry struct {
	UUID   string `json:"UUID,omitempty"`
	Temp   string `json:"temp,omitempty"`
	Memory *int64 `json:"memory,omitempty"`
	Core   *int32 `json:"core,omitempty"`
}

// DecodeRuntimeInfo reads huawei.com/<commonWord>.
func DecodeRuntimeInfo(value string) ([]RuntimeEntry, error) {
	var out []RuntimeEntry
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("want a JSON list of {UUID, temp} or {UUID, memory, core}: %w", err)
	}
	return out, nil
}
