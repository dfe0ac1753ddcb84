package agent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// Limits on the simulated node.
const (
	// MaxChips is the most chips one agent simulates (the backend's limit).
	MaxChips = ascendproto.MaxCards
	// hamiCorePercent is a whole chip's core capacity in hami-core mode.
	hamiCorePercent = 100
	// networkGroupSize is how many Ascend910 chips HAMi's plugin puts in
	// one network group (chips 0-3 in NetworkID 0, the others in 1).
	networkGroupSize = 4
	// ascend910Prefix marks chip types whose chips carry a NetworkID, and
	// ascend910C the one whose chips all share NetworkID 0.
	ascend910Prefix = "Ascend910"
	ascend910C      = "Ascend910C"
)

// Chip is one simulated chip.
type Chip struct {
	// PhyID is the physical ID ASCEND_VISIBLE_DEVICES names; the chip's
	// position on the node.
	PhyID int
	// UUID identifies the chip in the annotations.
	UUID      string
	MemoryMiB int64
	// AICore is the chip's AI cores.
	AICore  int32
	NUMA    int
	Healthy bool
	// NetworkID is the chip's network group (Ascend910 chip types); nil
	// for none.
	NetworkID *int64
}

// Spec describes the simulated chips of one node.
type Spec struct {
	// Node names the node; it is part of the chip UUIDs.
	Node string
	// Entry is the chip type's vnpus entry, defaults applied. Required.
	Entry config.VNPUConfig
	// HAMiCore is the node's mode: soft slicing (true) or templates.
	HAMiCore bool
	// Count is the number of chips, 1 to MaxChips.
	Count int
	// MemoryMiB and AICore of each chip; 0 means the entry's
	// memoryCapacity and aiCore.
	MemoryMiB int64
	AICore    int32
	// NUMA lists each chip's NUMA node; one value applies to all chips,
	// none means 0 (what HAMi's plugin writes).
	NUMA []int
	// NetworkIDs lists each chip's network group (Ascend910 chip types
	// only); one value applies to all, none means HAMi's rule.
	NetworkIDs []int64
	// Unhealthy lists the positions of unhealthy chips.
	Unhealthy []int
	// SplitCount is how many vNPUs may share a chip, which is also the
	// number of virtual devices per chip; 0 means HAMi's rule (see
	// DefaultSplitCount).
	SplitCount int
}

// Inventory is the node's simulated chips of one chip type. It is
// immutable and safe for concurrent use.
type Inventory struct {
	entry      config.VNPUConfig
	hamiCore   bool
	splitCount int
	chips      []Chip
	byUUID     map[string]int
}

// DefaultSplitCount is HAMi's Ascend device plugin's vNPU count per chip:
// the allocatable memory over the smallest template's, or 1 without
// templates.
func DefaultSplitCount(e config.VNPUConfig) int {
	allocatable := e.MemoryAllocatable
	if allocatable == 0 {
		allocatable = e.MemoryCapacity
	}
	smallest := int64(0)
	for _, t := range e.Templates {
		if t.Memory > 0 && (smallest == 0 || t.Memory < smallest) {
			smallest = t.Memory
		}
	}
	if smallest == 0 || allocatable < smallest {
		return 1
	}
	return int(allocatable / smallest)
}

// NewInventory builds the chips; errors name the field, the value and what
// is allowed.
func NewInventory(s Spec) (*Inventory, error) {
	e := s.Entry
	if e.CommonWord == "" || e.ResourceName == "" {
		return nil, errors.New("inventory: the vnpus entry needs a commonWord and a resourceName")
	}
	if s.Count < 1 || s.Count > MaxChips {
		return nil, fmt.Errorf("inventory: chips=%d: want 1 to %d", s.Count, MaxChips)
	}
	mem, cores := s.MemoryMiB, s.AICore
	if mem == 0 {
		mem = e.MemoryCapacity
	}
	if cores == 0 {
		cores = e.AICore
	}
	if mem <= 0 || mem > ascendproto.MaxMemoryMiB {
		return nil, fmt.Errorf("inventory: memory=%d MiB: want 1 to %d", mem, ascendproto.MaxMemoryMiB)
	}
	if cores <= 0 {
		return nil, fmt.Errorf("inventory: aiCore=%d: want more than 0", cores)
	}
	if len(s.NUMA) > 1 && len(s.NUMA) != s.Count {
		return nil, fmt.Errorf("inventory: numa has %d values for %d chips: want one or one per chip", len(s.NUMA), s.Count)
	}
	network := strings.HasPrefix(e.CommonWord, ascend910Prefix)
	if len(s.NetworkIDs) > 0 && !network {
		return nil, fmt.Errorf("inventory: network IDs given for chip type %s: only %s* chips carry one", e.CommonWord, ascend910Prefix)
	}
	if len(s.NetworkIDs) > 1 && len(s.NetworkIDs) != s.Count {
		return nil, fmt.Errorf("inventory: network IDs have %d values for %d chips: want one or one per chip", len(s.NetworkIDs), s.Count)
	}
	split := s.SplitCount
	if split == 0 {
		split = DefaultSplitCount(e)
	}
	if split < 1 || split > ascendproto.MaxCount {
		return nil, fmt.Errorf("inventory: split count %d: want 1 to %d", split, ascendproto.MaxCount)
	}
	inv := &Inventory{entry: e, hamiCore: s.HAMiCore, splitCount: split,
		chips: make([]Chip, s.Count), byUUID: make(map[string]int, s.Count)}
	for i := range inv.chips {
		c := Chip{PhyID: i, UUID: chipUUID(e.CommonWord, s.Node, i), MemoryMiB: mem, AICore: cores,
			NUMA: pick(s.NUMA, i, 0), Healthy: true}
		if network {
			id := pick(s.NetworkIDs, i, hamiNetworkID(e.CommonWord, i))
			c.NetworkID = &id
		}
		inv.chips[i] = c
		inv.byUUID[c.UUID] = i
	}
	for _, i := range s.Unhealthy {
		if i < 0 || i >= s.Count {
			return nil, fmt.Errorf("inventory: unhealthy chip %d: want 0 to %d", i, s.Count-1)
		}
		inv.chips[i].Healthy = false
	}
	return inv, nil
}

// chipUUID names chip i of the node; it never contains , : ; or spaces
// (node names are DNS subdomains).
func chipUUID(commonWord, node string, i int) string {
	return commonWord + "-" + node + "-" + strconv.Itoa(i)
}

// hamiNetworkID is HAMi's plugin's NetworkID of chip i.
func hamiNetworkID(commonWord string, i int) int64 {
	if commonWord == ascend910C || i < networkGroupSize {
		return 0
	}
	return 1
}

func pick[T any](list []T, i int, def T) T {
	switch len(list) {
	case 0:
		return def
	case 1:
		return list[0]
	}
	return list[i]
}

// Entry returns the chip type's vnpus entry.
func (inv *Inventory) Entry() config.VNPUConfig { return inv.entry }

// HAMiCore reports whether the node slices softly (hami-core).
func (inv *Inventory) HAMiCore() bool { return inv.hamiCore }

// SplitCount returns the vNPUs per chip.
func (inv *Inventory) SplitCount() int { return inv.splitCount }

// Chips returns the chips; shared, do not modify.
func (inv *Inventory) Chips() []Chip { return inv.chips }

// Chip returns the chip with the UUID.
func (inv *Inventory) Chip(uuid string) (Chip, bool) {
	i, ok := inv.byUUID[uuid]
	if !ok {
		return Chip{}, false
	}
	return inv.chips[i], true
}

// Register renders hami.io/node-register-<commonWord> as HAMi's plugin
// does: count = split count, devmem, devcore = AI cores (100 in hami-core
// mode), type = commonWord, numa, health and custominfo.NetworkID.
func (inv *Inventory) Register() (string, error) {
	cards := make([]ascendproto.RegisteredCard, len(inv.chips))
	for i, c := range inv.chips {
		devcore := c.AICore
		if inv.hamiCore {
			devcore = hamiCorePercent
		}
		cards[i] = ascendproto.RegisteredCard{ID: c.UUID, Index: c.PhyID, Count: int32(inv.splitCount), DevmemMiB: c.MemoryMiB,
			Devcore: devcore, Type: inv.entry.CommonWord, NUMA: c.NUMA, Healthy: c.Healthy, NetworkID: c.NetworkID}
	}
	return ascendproto.EncodeRegister(cards)
}

// Devices lists the virtual devices ListAndWatch advertises: SplitCount
// per chip, named as HAMi's plugin names them, with the chip's health and
// NUMA node.
func (inv *Inventory) Devices() []*pluginapi.Device {
	cards := make([]deviceplugin.Card, len(inv.chips))
	for i, c := range inv.chips {
		cards[i] = deviceplugin.Card{UUID: c.UUID, Count: inv.splitCount, Healthy: c.Healthy, NUMA: &c.NUMA}
	}
	return deviceplugin.VirtualDevices(cards)
}

// chipOfDevice returns the chip a virtual device ID belongs to.
func (inv *Inventory) chipOfDevice(id string) (Chip, bool) {
	cut := strings.LastIndexByte(id, '-')
	if cut < 0 {
		return Chip{}, false
	}
	n, err := strconv.Atoi(id[cut+1:])
	if err != nil || n < 0 || n >= inv.splitCount || strconv.Itoa(n) != id[cut+1:] {
		return Chip{}, false
	}
	return inv.Chip(id[:cut])
}
