package ascend

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/vnpu"
)

// Template indexes in use.tmpl besides catalogue positions.
const (
	// tmplWhole charges the whole chip (template mode).
	tmplWhole = -1
	// tmplNone charges no template (hami-core mode).
	tmplNone = -2
)

// cardInfo is the immutable part of one card.
type cardInfo struct {
	cardSpec
	// coresCap is the card's core capacity in the unit the node accounts:
	// percent (100) in hami-core mode, AI cores in template mode.
	coresCap int32
	typeOK   bool
}

// cardState is the mutable part of one card.
type cardState struct {
	cardledger.Usage
	slice vnpu.Slice
}

// holding is what one accounted pod holds, never modified after creation;
// the ledger keeps its hami.io/<commonWord>-devices-allocated value.
type holding struct {
	uses []use
}

// shared is what every copy of one node's Devices shares, immutable.
type shared struct {
	b         *Backend
	node      string
	soft      bool
	info      []cardInfo
	index     map[string]int
	templates []vnpu.Template
	// network is true when every card carries a NetworkID on an
	// Ascend910 chip type.
	network bool
	// warnings are the cordon entries that cordon nothing.
	warnings []error
}

// ledger is a node's per-pod accounting. Embedded in Devices, it supplies
// AddQueueResource, HasDeviceRequest, GetIgnoredDevices and Advertised.
type ledger = cardledger.Ledger[*holding]

// Devices is one chip type's state on one node. FilterNode, ScoreNode,
// GetStatus, CardUsage and Advertised only read; everything else needs
// exclusive access.
type Devices struct {
	*shared
	cards []cardState
	ledger
}

var (
	_ device.Devices      = (*Devices)(nil)
	_ device.Advertiser   = (*Devices)(nil)
	_ device.CardReporter = (*Devices)(nil)
)

func newDevices(b *Backend, node string, cards []cardSpec, soft bool) *Devices {
	s := &shared{b: b, node: node, soft: soft, info: make([]cardInfo, len(cards)),
		index: make(map[string]int, len(cards)), templates: b.chip.Templates(), network: b.network}
	var mem int64
	report := make([]cardledger.Card, len(cards))
	for i, c := range cards {
		ci := cardInfo{cardSpec: c, coresCap: fullCores, typeOK: typeMatches(c.typ, b)}
		if !soft {
			ci.coresCap = b.chip.Total.AICore
		}
		s.info[i] = ci
		s.index[c.id] = i
		s.network = s.network && c.hasNetwork
		mem += c.memMiB / b.factor
		// Cores are percent in hami-core mode, AI cores in template mode.
		report[i] = cardledger.Card{ID: c.id, Type: c.typ, Healthy: c.healthy, MemMiB: c.memMiB,
			Cores: ci.coresCap, MaxPods: c.count, Cordoned: c.cordoned}
	}
	// Advertised: the cards' memory in the memory resource's unit, and the
	// core resource 100 per card.
	advertised := v1.ResourceList{
		b.resMemory: *resource.NewQuantity(mem, resource.DecimalSI),
		b.resCore:   *resource.NewQuantity(int64(fullCores*len(cards)), resource.DecimalSI),
	}
	spec := cardledger.Spec{Device: b.name, Annotation: b.keys.Allocated, Count: b.resCount, Memory: b.resMemory,
		Cores: b.resCore, Factor: b.factor, Asks: b.asks, Ignored: b.ignored}
	return &Devices{shared: s, cards: make([]cardState, len(cards)), ledger: cardledger.NewLedger[*holding](spec, node, report, advertised)}
}

// typeMatches reports whether a registered card type names this chip type:
// empty, the commonWord, or containing the chip name (case-insensitive).
func typeMatches(typ string, b *Backend) bool {
	if typ == "" || typ == b.name {
		return true
	}
	t := strings.ToUpper(typ)
	return b.chip.Name != "" && strings.Contains(t, strings.ToUpper(b.chip.Name))
}

// templateOf returns the catalogue position a recorded memory is charged as.
func (d *Devices) templateOf(mem int64) int16 {
	if d.soft {
		return tmplNone
	}
	t, ok := d.b.chip.RoundUp(mem)
	if !ok || t.Whole() {
		return tmplWhole
	}
	for i := range d.templates {
		if d.templates[i].Name == t.Name {
			return int16(i)
		}
	}
	return tmplWhole
}

// template returns the template at position i (tmplWhole: the whole chip).
func (s *shared) template(i int16) vnpu.Template {
	if i >= 0 {
		return s.templates[i]
	}
	return s.b.chip.WholeChip()
}

// charge returns the cores a use takes: the request's percent in hami-core
// mode, the template's AI cores in template mode.
func (d *Devices) charge(u use) int32 {
	if u.tmpl == tmplNone {
		return u.cores
	}
	return d.template(u.tmpl).AICore
}

// apply adds (sign 1) or removes (sign -1) a holding.
func (d *Devices) apply(h *holding, sign int32) {
	for _, u := range h.uses {
		applyUse(d.shared, &d.cards[u.card], u, sign)
	}
}

// Total sums the memory and cores the uses record (cores are 0 for
// templates, which record memory only), for queue accounting.
func (h *holding) Total() cardledger.Total {
	return cardledger.Sum(h.uses, func(u *use) (int64, int32) { return u.mem, u.cores })
}

func applyUse(s *shared, c *cardState, u use, sign int32) {
	if u.tmpl == tmplNone {
		c.Take(u.mem, u.cores, sign)
		return
	}
	t := s.template(u.tmpl)
	c.Take(u.mem, t.AICore, sign)
	if sign > 0 {
		c.slice = c.slice.Add(t)
	} else {
		c.slice = c.slice.Remove(t)
	}
}

// AddResource accounts the allocation recorded in the pod's
// hami.io/<commonWord>-devices-allocated. Finished pods and pods without the
// annotation are ignored; a pod already accounted is a no-op with the same
// record and an error otherwise; a malformed record is an error naming the
// annotation and leaves the state unchanged.
func (d *Devices) AddResource(pod *v1.Pod) error {
	_, err := cardledger.Account(d.ledger, pod, func(value string) (*holding, error) {
		uses, err := d.decode(value, len(pod.Spec.Containers))
		return &holding{uses: uses}, err
	}, d.apply)
	return err
}

// SubResource removes what AddResource or Allocate accounted for the pod.
func (d *Devices) SubResource(pod *v1.Pod) error { cardledger.Drop(d.ledger, pod, d.apply); return nil }

// CardUsage returns every card's usage and the number of pods holding
// cards of this type on the node. Cores are percent in hami-core mode and
// AI cores in template mode.
func (d *Devices) CardUsage() ([]device.CardUsage, int) {
	return cardledger.CardUsage(d.ledger, d.cards)
}

// GetStatus renders every card, "; "-separated, as
// "i id type: used/total MiB, cores c/C, AI CPUs u/U, vNPUs n/N" plus
// ", unhealthy" and ", network N" when they apply, after the node's mode.
func (d *Devices) GetStatus() string {
	var b strings.Builder
	if d.soft {
		b.WriteString("hami-core")
	} else {
		b.WriteString("template")
	}
	for i := range d.cards {
		ci, c := &d.info[i], &d.cards[i]
		fmt.Fprintf(&b, "; %d %s %s: %d/%d MiB, cores %d/%d, AI CPUs %d/%d, vNPUs %d/%d", i, ci.id, ci.typ,
			c.UsedMiB, ci.memMiB, c.UsedCores, ci.coresCap, c.slice.Used.AICPU, d.b.chip.Total.AICPU, c.UsedNum, ci.count)
		if !ci.healthy {
			b.WriteString(", unhealthy")
		}
		if ci.cordoned {
			b.WriteString(", cordoned")
		}
		if ci.hasNetwork {
			b.WriteString(", network " + strconv.FormatInt(ci.network, 10))
		}
	}
	return b.String()
}

// DeepCopy returns an independent copy; the immutable parts are shared.
func (d *Devices) DeepCopy() device.Devices {
	return &Devices{shared: d.shared, cards: slices.Clone(d.cards), ledger: cardledger.Clone(d.ledger)}
}

// logAllocation logs one decision at level 4.
func (d *Devices) logAllocation(pod *v1.Pod, what, value string) {
	if v := klog.V(4); v.Enabled() {
		v.InfoS(what, "pod", klog.KObj(pod), "node", d.node, "chip", d.b.name, "cards", value)
	}
}
