package vgpu

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/backends/vgpu/inventory"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// cardInfo is the immutable part of one card, shared by every copy of the
// node's Devices.
type cardInfo struct {
	uuid, typ, typUpper string
	mode                string
	count               int32
	coresTotal          int32
	numa                int32
	healthy             bool
	// cordoned cards are skipped for new pods (node annotation
	// volcano.sh/vgpu-cordon or hami.io/device-cordon); pods holding them
	// keep them.
	cordoned bool
	memMiB   int64
	// mig is the card's MIG layout; nil unless the card is in MIG mode with a
	// known geometry.
	mig *inventory.Layout
	// linkSum is the card's total link score to the other cards.
	linkSum int64
	// fig is the card's figures for the fragment policy (fragCard).
	fig frag.Card
}

// cardState is the mutable part of one card. It is a value: copies of
// Devices clone the slice; gangs is copied on write, never changed in place.
type cardState struct {
	cardledger.Usage
	// migGroup is the geometry in use (-1: none); migUsed its used positions.
	migGroup int16
	migUsed  uint64
	// gangs counts the cards' holders per PodGroup, sorted by key.
	gangs []gangCount
	// excl counts the card's holders per exclusive rule, by rule index
	// (nil: none); copied on write like gangs.
	excl []int32
}

type gangCount struct {
	key string
	n   int32
}

// use is one card of one container of an accounted pod.
type use struct {
	card int32
	// entry is the container's entry in the allocation.
	entry int32
	cores int32
	// mem is the memory accounted on the card (a MIG instance's size);
	// recMem the memory recorded in the annotation.
	mem, recMem int64
	migGroup    int16
	migPos      int16
}

// holding is what one accounted pod holds; the ledger keeps its
// volcano.sh/vgpu-ids-new value. It is never modified after creation, so
// copies of Devices share it.
type holding struct {
	gang string
	// rules are the exclusive rules the pod matched when accounted.
	rules uint64
	// uses are the pod's cards container by container, as recorded.
	uses []use
	// charges are what the pod holds of each card at its peak
	// (vgpuproto.Peak), what apply adds to the cards, for a pod whose
	// init containers have cards; nil for any other pod, whose uses are
	// added one by one (the same sums, without the extra allocations).
	charges []vgpuproto.Charge[int32]
	// total is what Total reports: the charges (the uses when there are
	// none), with the memory recorded rather than the MIG instances taken.
	total cardledger.Total
}

// newHolding returns the holding of uses for a pod whose allocation
// entries have roles (nil: every entry a regular container's).
func newHolding(gang string, rules uint64, roles []vgpuproto.Role, uses []use) *holding {
	h := &holding{gang: gang, rules: rules, uses: uses}
	if roles == nil {
		h.total = cardledger.Sum(uses, func(u *use) (int64, int32) { return u.recMem, u.cores })
		return h
	}
	pu := make([]vgpuproto.Use[int32], len(uses))
	for i, u := range uses {
		pu[i] = vgpuproto.Use[int32]{Entry: int(u.entry), Card: u.card, Mem: u.mem, Cores: u.cores, Whole: u.migPos >= 0}
	}
	h.charges = vgpuproto.Peak(roles, pu)
	for i, u := range uses {
		pu[i].Mem = u.recMem
	}
	for _, c := range vgpuproto.Peak(roles, pu) {
		h.total.Cards += int(c.Holders)
		h.total.MemMiB += c.Mem
		h.total.Cores += int64(c.Cores)
	}
	return h
}

// shared is what every copy of one node's Devices shares, immutable.
type shared struct {
	b     *Backend
	node  string
	info  []cardInfo
	links []int32
	// warnings are the parts of the node's registration and settings that
	// were left out (unreadable link scores, cordon entries naming no card).
	warnings []error
	// hami is set when the node is registered only in HAMi's format: its
	// agent is HAMi's plugin, which reads the hami.io/* allocation (hami.go).
	hami bool
	// initAgent is set when the node's agent serves init containers
	// (inventory.Inventory.InitAgent).
	initAgent bool
	// sizedAgent is set when the node's agent matches an Allocate to a pod
	// by the entry's size (inventory.Inventory.SizedAgent).
	sizedAgent bool
}

// ledger is a node's per-pod accounting. Embedded in Devices, it supplies
// AddQueueResource, HasDeviceRequest, GetIgnoredDevices and Advertised.
type ledger = cardledger.Ledger[*holding]

// Devices is the vGPU state of one node: its cards and the pods holding
// them. FilterNode, ScoreNode, GetStatus, CardUsage and Advertised only
// read and may run concurrently; everything else needs exclusive access.
type Devices struct {
	*shared
	cards []cardState
	// now is the fragment policy's measure of cards under the learned
	// target it names (fragNow), nil until measured; every write to the
	// cards clears it (apply), the rule under which the plugin keeps the
	// node's results (a write moves the node's stamp, a new target the
	// backend's epoch). Read-only once stored.
	now atomic.Pointer[frag.Measure]
	ledger
}

var (
	_ device.Devices      = (*Devices)(nil)
	_ device.Fitter       = (*Devices)(nil)
	_ device.Advertiser   = (*Devices)(nil)
	_ device.CardReporter = (*Devices)(nil)
)

func newDevices(b *Backend, node string, inv *inventory.Inventory) *Devices {
	s := &shared{b: b, node: node, info: make([]cardInfo, len(inv.Cards)), links: inv.Links, warnings: inv.Warnings,
		hami: inv.Source == vgpuproto.AnnotationHAMiRegister, initAgent: inv.InitAgent,
		sizedAgent: inv.SizedAgent}
	n := len(inv.Cards)
	var memUnits, slots int64
	report := make([]cardledger.Card, n)
	for i, c := range inv.Cards {
		ci := cardInfo{uuid: c.UUID, typ: c.Type, typUpper: strings.ToUpper(c.Type), mode: c.Mode, count: c.Count,
			coresTotal: c.Cores, numa: c.NUMA, healthy: c.Healthy, memMiB: c.MemMiB, cordoned: inv.Cordoned != nil && inv.Cordoned[i]}
		if c.Mode == vgpuproto.ModeMIG && s.hami {
			// HAMi's MIG allocation format is not written (hami.go): never
			// hand such a card out rather than hand it out wrongly.
			ci.healthy = false
			klog.InfoS("vGPU card registered by HAMi's plugin in mig mode; HAMi's MIG allocations are not supported, "+
				"the card is not scheduled", "node", node, "card", c.UUID)
		} else if c.Mode == vgpuproto.ModeMIG {
			ci.mig = inventory.LayoutFor(b.migCatalogue, c.Type)
			if ci.mig == nil {
				ci.mode = vgpuproto.ModeHAMiCore
				klog.InfoS("vGPU card registered in mig mode but its model has no known MIG geometry; sharing it as hami-core",
					"node", node, "card", c.UUID, "type", c.Type)
			}
		}
		ci.fig = fragCard(&ci)
		for j := 0; s.links != nil && j < n; j++ {
			ci.linkSum += int64(s.links[i*n+j])
		}
		memUnits += c.MemMiB / b.parser.Factor
		slots += int64(c.Count)
		s.info[i] = ci
		report[i] = cardledger.Card{ID: c.UUID, Type: c.Type, Healthy: c.Healthy, MemMiB: c.MemMiB,
			Cores: c.Cores, MaxPods: c.Count, Cordoned: ci.cordoned}
	}
	// Advertised: memory in its resource's unit (MiB / gpuMemoryFactor per
	// card), memory-percentage and cores 100 per card. Per container
	// Kubernetes counts one card's worth of each.
	advertised := v1.ResourceList{
		b.parser.ResMemory:  *resource.NewQuantity(memUnits, resource.DecimalSI),
		b.parser.ResPercent: *resource.NewQuantity(int64(100*n), resource.DecimalSI),
		b.parser.ResCores:   *resource.NewQuantity(int64(fullCores*n), resource.DecimalSI),
		// Task priority (request/priority.go): one per container the cards can
		// hold, so a priority of 1 never fails a resource fit.
		b.parser.ResPriority: *resource.NewQuantity(slots, resource.DecimalSI),
	}
	spec := cardledger.Spec{Device: Name, Annotation: vgpuproto.AnnotationIDs, Count: b.parser.ResCount, Memory: b.parser.ResMemory,
		Cores: b.parser.ResCores, Factor: b.parser.Factor, Asks: b.HasDeviceRequest, Ignored: b.ignored}
	d := &Devices{shared: s, cards: make([]cardState, n), ledger: cardledger.NewLedger[*holding](spec, node, report, advertised)}
	for i := range d.cards {
		d.cards[i].migGroup = -1
	}
	b.workload.RegisterSupply(node, d.supplyOf())
	return d
}

// apply adds (sign 1) or removes (sign -1) a holding: its uses one by
// one, or its charges when it has some, the MIG instances its uses take,
// and its PodGroup and exclusive rules once per holder.
func (d *Devices) apply(h *holding, sign int32) {
	d.now.Store(nil)
	for _, ch := range h.charges {
		d.take(ch.Card, ch.Mem, ch.Cores, ch.Holders, h, sign)
	}
	for _, u := range h.uses {
		if h.charges == nil {
			d.take(u.card, u.mem, u.cores, 1, h, sign)
		}
		c := &d.cards[u.card]
		if u.migPos >= 0 {
			if sign > 0 {
				c.migGroup = u.migGroup
				c.migUsed |= 1 << uint(u.migPos)
			} else {
				c.migUsed &^= 1 << uint(u.migPos)
			}
		}
		if c.migUsed == 0 {
			c.migGroup = -1
		}
	}
}

// take adds (sign 1) or removes (sign -1) holders holders of h holding mem
// MiB and cores of card i.
func (d *Devices) take(i int32, mem int64, cores, holders int32, h *holding, sign int32) {
	c := &d.cards[i]
	c.UsedMiB += int64(sign) * mem
	c.UsedCores += sign * cores
	c.UsedNum += sign * holders
	if h.gang != "" {
		c.gangs = addGang(c.gangs, h.gang, sign*holders)
	}
	if h.rules != 0 {
		c.excl = addRules(c.excl, h.rules, sign*holders)
	}
}

// Total is what the pod holds at its peak, card by card, with the memory
// recorded (not the MIG instances taken) and the cores asked for, for
// queue accounting.
func (h *holding) Total() cardledger.Total { return h.total }

// addGang returns a new sorted slice with key's count changed by delta.
func addGang(gangs []gangCount, key string, delta int32) []gangCount {
	i, found := slices.BinarySearchFunc(gangs, key, func(g gangCount, k string) int { return strings.Compare(g.key, k) })
	out := slices.Clone(gangs)
	switch {
	case found && out[i].n+delta <= 0:
		out = slices.Delete(out, i, i+1)
	case found:
		out[i].n += delta
	case delta > 0:
		out = slices.Insert(out, i, gangCount{key: key, n: delta})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// hasGang reports whether the card holds a member of the PodGroup.
func (c *cardState) hasGang(key string) bool {
	_, found := slices.BinarySearchFunc(c.gangs, key, func(g gangCount, k string) int { return strings.Compare(g.key, k) })
	return found
}

// AddResource accounts the allocation recorded in the pod's
// volcano.sh/vgpu-ids-new or, for a bound pod only HAMi's scheduler placed,
// its hami.io/vgpu-devices-allocated (its NVIDIA cards): what the pod holds
// of each card at its peak (vgpuproto.Peak; a record with entries for the
// init containers, see vgpuproto.InitEntries, charges their phases). Pods
// in phase Succeeded or Failed and pods without the annotation are
// ignored. A pod already accounted is a no-op
// when the record is the same and an error otherwise. A malformed record
// (unknown card, bad numbers, a MIG position taken) is an error naming the
// annotation and the value; the state is then unchanged.
func (d *Devices) AddResource(pod *v1.Pod) error {
	key, decode := vgpuproto.AnnotationIDs, d.decodeUses
	if placedByHAMi(pod) {
		key, decode = vgpuproto.AnnotationHAMiAllocated, d.decodeHAMiUses
	}
	added, err := cardledger.AccountFrom(d.ledger, pod, key, func(value string) (*holding, error) {
		uses, roles, err := decode(value, pod)
		if err == nil {
			err = d.checkMIG(uses)
		}
		return newHolding(request.PodGang(pod), d.b.parser.RuleMask(pod), roles, uses), err
	}, d.apply)
	if v := klog.V(5); added && v.Enabled() {
		v.InfoS("Accounted vGPU cards", "pod", klog.KObj(pod), "node", d.node, "cards", pod.Annotations[key])
	}
	return err
}

// SubResource removes what AddResource (or Allocate) accounted for the pod,
// as recorded then. A pod that is not accounted is a no-op.
func (d *Devices) SubResource(pod *v1.Pod) error { cardledger.Drop(d.ledger, pod, d.apply); return nil }

// CardUsage returns every card's usage and the number of pods holding
// cards on the node.
func (d *Devices) CardUsage() ([]device.CardUsage, int) {
	return cardledger.CardUsage(d.ledger, d.cards)
}

// GetStatus renders every card, "; "-separated, as
// "i UUID type mode numa N: used/total MiB, cores c/C, pods p/P" with
// ", unhealthy", ", cordoned", ", mig group/positions" and ", gangs [...]" when they apply.
func (d *Devices) GetStatus() string {
	var b strings.Builder
	for i := range d.cards {
		ci, c := &d.info[i], &d.cards[i]
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strconv.Itoa(i) + " " + ci.uuid + " " + ci.typ + " " + ci.mode + " numa " + itoa(int64(ci.numa)) +
			": " + itoa(c.UsedMiB) + "/" + itoa(ci.memMiB) + " MiB, cores " + itoa(int64(c.UsedCores)) + "/" +
			itoa(int64(ci.coresTotal)) + ", pods " + itoa(int64(c.UsedNum)) + "/" + itoa(int64(ci.count)))
		if !ci.healthy {
			b.WriteString(", unhealthy")
		}
		if ci.cordoned {
			b.WriteString(", cordoned")
		}
		if c.migGroup >= 0 {
			b.WriteString(", mig " + ci.mig.Groups[c.migGroup].Name + "/" + strconv.FormatUint(c.migUsed, 2))
		}
		if len(c.gangs) > 0 {
			b.WriteString(", gangs [")
			for j, g := range c.gangs {
				if j > 0 {
					b.WriteString(" ")
				}
				b.WriteString(g.key + "x" + itoa(int64(g.n)))
			}
			b.WriteString("]")
		}
		if len(c.excl) > 0 {
			b.WriteString(rulesStatus(c.excl))
		}
	}
	return b.String()
}

// DeepCopy returns an independent copy; the immutable parts are shared.
func (d *Devices) DeepCopy() device.Devices {
	return &Devices{shared: d.shared, cards: slices.Clone(d.cards), ledger: cardledger.Clone(d.ledger)}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
