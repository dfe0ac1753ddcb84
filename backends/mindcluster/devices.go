package mindcluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
	"github.com/vgpushare/vshare/vnpu"
)

// Devices is one node's 310P chips and the pods holding them.
//
// Chips come from the registration (the offered and the unhealthy lists)
// and from the pods: a chip the device plugin no longer offers because its
// vNPUs are in use is known through the pods' allocations, as Volcano's
// plugin rebuilds it, and forgotten when its last holder leaves.
type Devices struct {
	b     *Backend
	inv   *inventory
	chips map[int]*chipState
	pods  map[types.UID]holding
	// inflight counts held vNPUs the device plugin has not confirmed (no
	// huawei.com/AscendReal on the pod yet).
	inflight int
}

type chipState struct {
	id int
	// healthy is false for chips in the unhealthy list.
	healthy bool
	// listed is true for chips of the registration; others exist while
	// pods hold them.
	listed bool
	slice  vnpu.Slice
	// whole counts pods holding the entire chip.
	whole int32
	// vgroups counts confirmed vNPUs per vNPU group the device plugin put
	// them in (see vgroupOf).
	vgroups [maxVGroups]int32
}

// maxVGroups bounds the vNPU group IDs tracked; a 310P chip has 4.
const maxVGroups = 8

// usedVGroups returns how many vNPU groups of the chip hold vNPUs.
func (c *chipState) usedVGroups() int {
	n := 0
	for _, v := range c.vgroups {
		if v > 0 {
			n++
		}
	}
	return n
}

// holding is what one pod holds on the node.
type holding struct {
	chips []int
	// template is the vNPU template; "" for whole chips.
	template string
	// inflight is true for a vNPU the device plugin has not confirmed.
	inflight bool
	// vgroup is the confirmed vNPU's group, -1 when unknown.
	vgroup int
}

// vgroupOf reads the vNPU group from huawei.com/AscendReal; -1 when there
// is none (an unconfirmed vNPU) or it cannot be tracked.
func vgroupOf(ascendReal string) int {
	g, ok := mindclusterproto.VNPUGroup(ascendReal)
	if !ok || g >= maxVGroups {
		return -1
	}
	return g
}

var (
	_ device.Devices      = (*Devices)(nil)
	_ device.CardReporter = (*Devices)(nil)
)

func newDevices(b *Backend, inv *inventory) *Devices {
	d := &Devices{b: b, inv: inv, chips: make(map[int]*chipState, inv.totalChips), pods: map[types.UID]holding{}}
	for _, id := range inv.free {
		d.chips[id] = &chipState{id: id, healthy: true, listed: true}
	}
	for _, id := range inv.unhealthy {
		d.chips[id] = &chipState{id: id, listed: true}
	}
	return d
}

// sortedChips returns the chips by ID.
func (d *Devices) sortedChips() []*chipState {
	out := make([]*chipState, 0, len(d.chips))
	for _, c := range d.chips {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *chipState) int { return a.id - b.id })
	return out
}

// apply adds (sign 1) or removes (sign -1) a holding. Removing the last
// holder of an unlisted chip forgets the chip.
func (d *Devices) apply(h holding, sign int32) {
	var t vnpu.Template
	if h.template != "" {
		t, _ = d.inv.chip.Template(h.template) // checked by decodeAllocation
	}
	for _, id := range h.chips {
		c := d.chips[id]
		if c == nil {
			c = &chipState{id: id, healthy: true}
			d.chips[id] = c
		}
		if h.vgroup >= 0 {
			c.vgroups[h.vgroup] += sign
		}
		switch {
		case h.template == "":
			c.whole += sign
		case sign > 0:
			c.slice = c.slice.Add(t)
		default:
			c.slice = c.slice.Remove(t)
		}
		if !c.listed && c.whole == 0 && c.slice.Instances == 0 {
			delete(d.chips, id)
		}
	}
	if h.inflight {
		d.inflight += int(sign)
	}
}

// decodeAllocation reads the pod's huawei.com/npu-core annotation and
// checks it against the node and the pod's request.
func (d *Devices) decodeAllocation(pod *v1.Pod, value string) (holding, error) {
	bad := func(format string, a ...any) (holding, error) {
		return holding{}, fmt.Errorf("annotation %s=%q: %s", mindclusterproto.AnnotationNPUCore, value, fmt.Sprintf(format, a...))
	}
	req, err := parseRequest(pod)
	if err != nil {
		return bad("cannot be checked against the request: %v", err)
	}
	a, err := mindclusterproto.DecodeNPUCore(value)
	if err != nil {
		return bad("%v", err)
	}
	h := holding{chips: a.Chips, template: a.Template, vgroup: -1}
	if a.Template != "" {
		t, known := d.inv.chip.Template(a.Template)
		if !known {
			return bad("unknown template %q: want one of %s", a.Template, templateNames(d.inv.chip))
		}
		if int64(t.AICore) != req.cores {
			return bad("template %s has %d AI cores, the pod asks for %d", a.Template, t.AICore, req.cores)
		}
		ascendReal := pod.Annotations[mindclusterproto.AnnotationAscendReal]
		h.inflight, h.vgroup = ascendReal == "", vgroupOf(ascendReal)
	}
	newChips := 0
	for _, id := range h.chips {
		if _, known := d.chips[id]; !known {
			newChips++
		}
	}
	if len(d.chips)+newChips > d.inv.totalChips {
		return bad("names chips beyond the node's %d", d.inv.totalChips)
	}
	if h.template == "" && int64(len(h.chips))*int64(d.inv.perChip) != req.cores {
		return bad("%d whole chips of %d AI cores, the pod asks for %d AI cores", len(h.chips), d.inv.perChip, req.cores)
	}
	return h, nil
}

func templateNames(c *vnpu.Chip) string {
	var names []string
	for _, t := range c.Templates() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// encode renders a holding as the huawei.com/npu-core annotation.
func (h holding) encode() string {
	return mindclusterproto.EncodeNPUCore(mindclusterproto.NPUCore{Chips: h.chips, Template: h.template})
}

// AddResource accounts the allocation in the pod's huawei.com/npu-core
// annotation. A pod already accounted is not counted again; a malformed or
// inconsistent annotation is an error naming it, and changes nothing.
// Allocations that overfill a chip are accounted as they are: the pod holds
// the chip whatever this node's view says, so the chip shows as full.
func (d *Devices) AddResource(pod *v1.Pod) error {
	if !asks(pod) {
		return nil
	}
	value, ok := pod.Annotations[mindclusterproto.AnnotationNPUCore]
	if !ok {
		return nil
	}
	if _, held := d.pods[pod.UID]; held {
		return nil
	}
	h, err := d.decodeAllocation(pod, value)
	if err != nil {
		return err
	}
	d.apply(h, 1)
	d.pods[pod.UID] = h
	return nil
}

// SubResource removes what AddResource or Allocate accounted for the pod.
func (d *Devices) SubResource(pod *v1.Pod) error {
	h, ok := d.pods[pod.UID]
	if !ok {
		return nil
	}
	d.apply(h, -1)
	delete(d.pods, pod.UID)
	return nil
}

// AddQueueResource reports the AI cores the pod holds here, by
// huawei.com/npu-core; nil when it holds nothing here.
func (d *Devices) AddQueueResource(pod *v1.Pod) map[string]float64 {
	h, ok := d.pods[pod.UID]
	if !ok {
		return nil
	}
	return map[string]float64{string(mindclusterproto.ResourceNPUCore): float64(d.coresOf(h))}
}

func (d *Devices) coresOf(h holding) int64 {
	if h.template == "" {
		return int64(len(h.chips)) * int64(d.inv.perChip)
	}
	t, _ := d.inv.chip.Template(h.template)
	return int64(t.AICore)
}

// HasDeviceRequest reports whether the pod asks for huawei.com/npu-core.
func (d *Devices) HasDeviceRequest(pod *v1.Pod) bool { return asks(pod) }

// GetIgnoredDevices returns nil: nodes advertise huawei.com/npu-core, the
// only resource pods ask for, so Volcano's own fit may see it.
func (d *Devices) GetIgnoredDevices() []string { return nil }

// freeCores sums the AI cores left on healthy chips no pod holds whole.
func (d *Devices) freeCores() int64 {
	var n int64
	for _, c := range d.chips {
		if c.healthy && c.whole == 0 {
			n += int64(d.inv.perChip - c.slice.Used.AICore)
		}
	}
	return n
}

// CardUsage reports every chip: AI cores (CoresUsed/Total count AI cores,
// not percent), memory, and the pods on it; MaxPods is the most vNPUs a chip
// takes (one per AI CPU).
func (d *Devices) CardUsage() ([]device.CardUsage, int) {
	out := make([]device.CardUsage, 0, len(d.chips))
	total := d.inv.chip.Total
	for _, c := range d.sortedChips() {
		u := device.CardUsage{
			ID: mindclusterproto.ChipPrefix + strconv.Itoa(c.id), Index: c.id, Type: d.inv.chipName, Healthy: c.healthy,
			MemoryUsedMiB: c.slice.Used.MemoryMiB, MemoryTotalMiB: total.MemoryMiB,
			CoresUsed: int64(c.slice.Used.AICore), CoresTotal: int64(total.AICore),
			Pods: int(c.slice.Instances + c.whole), MaxPods: int(total.AICPU),
		}
		if c.whole > 0 {
			u.MemoryUsedMiB += int64(c.whole) * total.MemoryMiB
			u.CoresUsed += int64(c.whole) * int64(total.AICore)
		}
		out = append(out, u)
	}
	return out, len(d.pods)
}

// GetStatus renders the node's chips as "Ascend310P-<id>: cores used/total,
// cpus used/total, [templates], whole N" with unhealthy and unlisted
// flags, then the in-flight vNPU count.
func (d *Devices) GetStatus() string {
	held := map[int][]string{}
	for _, h := range d.pods {
		for _, id := range h.chips {
			if h.template != "" {
				held[id] = append(held[id], h.template)
			}
		}
	}
	var sb strings.Builder
	for _, c := range d.sortedChips() {
		slices.Sort(held[c.id])
		fmt.Fprintf(&sb, "%s%d: cores %d/%d, cpus %d/%d, %v, whole %d", mindclusterproto.ChipPrefix, c.id, c.slice.Used.AICore,
			d.inv.perChip, c.slice.Used.AICPU, d.inv.chip.Total.AICPU, held[c.id], c.whole)
		if !c.healthy {
			sb.WriteString(", unhealthy")
		}
		if !c.listed {
			sb.WriteString(", unlisted")
		}
		if c.usedVGroups() > 0 {
			fmt.Fprintf(&sb, ", vgroups %v", c.vgroups)
		}
		sb.WriteString("; ")
	}
	fmt.Fprintf(&sb, "in flight %d", d.inflight)
	return sb.String()
}

// DeepCopy returns an independent copy (the inventory is immutable and
// shared).
func (d *Devices) DeepCopy() device.Devices {
	out := &Devices{b: d.b, inv: d.inv, chips: make(map[int]*chipState, len(d.chips)),
		pods: maps.Clone(d.pods), inflight: d.inflight}
	for id, c := range d.chips {
		cp := *c
		out.chips[id] = &cp
	}
	return out
}
