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
	"github.com/vgpushare/vshare/deviceshare/api"
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

// holding is what one accounted pod holds; never modified after creation.
type holding struct {
	value string
	uses  []use
}

// Record returns the hami.io/<commonWord>-devices-allocated value of the
// holding.
func (h *holding) Record() string { return h.value }

// Total sums the memory recorded and the cores asked for (0 for
// templates, which record memory only).
func (h *holding) Total() cardledger.Total {
	return cardledger.Sum(h.uses, func(u *use) (int64, int32) { return u.mem, u.cores })
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
	network    bool
	advertised v1.ResourceList
}

// Devices is one chip type's state on one node. FilterNode, ScoreNode,
// GetStatus, CardUsage and Advertised only read; everything else needs
// exclusive access.
type Devices struct {
	*shared
	cards []cardState
	pods  cardledger.Records[*holding]
}

var (
	_ api.Devices      = (*Devices)(nil)
	_ api.Advertiser   = (*Devices)(nil)
	_ api.CardReporter = (*Devices)(nil)
)

func newDevices(b *Backend, node string, cards []cardSpec, soft bool) *Devices {
	s := &shared{b: b, node: node, soft: soft, info: make([]cardInfo, len(cards)),
		index: make(map[string]int, len(cards)), templates: b.chip.Templates(), network: b.network}
	var mem int64
	for i, c := range cards {
		ci := cardInfo{cardSpec: c, coresCap: fullCores, typeOK: typeMatches(c.typ, b)}
		if !soft {
			ci.coresCap = b.chip.Total.AICore
		}
		s.info[i] = ci
		s.index[c.id] = i
		s.network = s.network && c.hasNetwork
		mem += c.memMiB / b.factor
	}
	s.advertised = v1.ResourceList{
		b.resMemory: *resource.NewQuantity(mem, resource.DecimalSI),
		b.resCore:   *resource.NewQuantity(int64(fullCores*len(cards)), resource.DecimalSI),
	}
	return &Devices{shared: s, cards: make([]cardState, len(cards)), pods: cardledger.NewRecords[*holding](cardledger.Spec{
		Device: b.name, Node: node, Annotation: b.keys.Allocated,
		Count: b.resCount, Memory: b.resMemory, Cores: b.resCore, Factor: b.factor,
	})}
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
	_, err := d.pods.Account(pod, func(value string) (*holding, error) {
		uses, err := d.decode(value, len(pod.Spec.Containers))
		return &holding{value: value, uses: uses}, err
	}, d.apply)
	return err
}

// SubResource removes what AddResource or Allocate accounted for the pod.
func (d *Devices) SubResource(pod *v1.Pod) error {
	d.pods.Drop(pod, d.apply)
	return nil
}

// AddQueueResource reports what the pod holds here: cards, memory (in the
// memory resource's unit) and cores.
func (d *Devices) AddQueueResource(pod *v1.Pod) map[string]float64 { return d.pods.Queue(pod) }

// HasDeviceRequest reports whether the pod asks for this chip type.
func (d *Devices) HasDeviceRequest(pod *v1.Pod) bool { return d.b.asks(pod) }

// GetIgnoredDevices returns the memory and core resource names, accounted
// per card here.
func (d *Devices) GetIgnoredDevices() []string { return slices.Clone(d.b.ignored) }

// Advertised returns the node totals of the memory resource (the cards'
// memory in the resource's unit) and of the core resource (100 per card).
// A container's request is at most one card's worth of each, so these
// totals never reject a pod the cards could take. Shared; do not modify.
func (d *Devices) Advertised() v1.ResourceList { return d.advertised }

// CardUsage returns every card's usage and the number of pods holding
// cards of this type on the node. Cores are percent in hami-core mode and
// AI cores in template mode.
func (d *Devices) CardUsage() ([]api.CardUsage, int) {
	return cardledger.Report(len(d.cards), d.cardUsage), d.pods.Len()
}

// cardUsage describes card i for CardUsage, with its cores in the node's
// unit.
func (d *Devices) cardUsage(i int) (cardledger.Card, cardledger.Usage) {
	ci := &d.info[i]
	return cardledger.Card{ID: ci.id, Type: ci.typ, Healthy: ci.healthy, MemMiB: ci.memMiB,
		Cores: ci.coresCap, MaxPods: ci.count}, d.cards[i].Usage
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
		if ci.hasNetwork {
			b.WriteString(", network " + strconv.FormatInt(ci.network, 10))
		}
	}
	return b.String()
}

// DeepCopy returns an independent copy; the immutable parts are shared.
func (d *Devices) DeepCopy() api.Devices {
	return &Devices{shared: d.shared, cards: slices.Clone(d.cards), pods: d.pods.Clone()}
}

// logAllocation logs one decision at level 4.
func (d *Devices) logAllocation(pod *v1.Pod, what, value string) {
	if v := klog.V(4); v.Enabled() {
		v.InfoS(what, "pod", klog.KObj(pod), "node", d.node, "chip", d.b.name, "cards", value)
	}
}
