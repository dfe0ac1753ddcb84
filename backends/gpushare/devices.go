package gpushare

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// card is one GPU's state.
type card struct {
	total int64
	// used is the memory held by share pods.
	used int64
	// sharePods counts the share pods on the card, numberPods the gpu-number
	// pods holding it whole (at most one unless the cluster overcommitted it
	// before this scheduler saw it).
	sharePods, numberPods int32
	healthy               bool
}

// idle reports whether a gpu-number pod may take the card.
func (c *card) idle() bool { return c.healthy && c.sharePods == 0 && c.numberPods == 0 }

// free is the memory a share pod may still take on the card.
func (c *card) free() int64 {
	if c.numberPods > 0 {
		return 0
	}
	return c.total - c.used
}

// fitsShare reports whether a share pod asking for req fits on the card.
// FilterNode, ScoreNode and Allocate all use it, so they agree.
func (c *card) fitsShare(req int64) bool { return c.healthy && c.free() >= req }

// holding is what one accounted pod holds. Its cards slice is never
// modified after creation, so copies of Devices share it.
type holding struct {
	// whole is true for a gpu-number pod, false for a share pod.
	whole bool
	cards []int
	// memory is a share pod's request.
	memory int64
}

func (h holding) equal(o holding) bool {
	return h.whole == o.whole && h.memory == o.memory && slices.Equal(h.cards, o.cards)
}

// Devices is the state of one node's cards for one mode. Both modes account
// share pods and gpu-number pods alike (they use the same cards and the same
// annotation); the mode decides what FilterNode, ScoreNode and Allocate do.
// Not safe for concurrent use, except that FilterNode, ScoreNode, GetStatus
// and Cards only read and may run concurrently with each other.
type Devices struct {
	backend *Backend
	node    string
	cards   []card
	pods    cardledger.Pods[holding]
}

var (
	_ device.Devices      = (*Devices)(nil)
	_ device.CardReporter = (*Devices)(nil)
)

func newDevices(b *Backend, node string, inv inventory) *Devices {
	d := &Devices{backend: b, node: node, cards: make([]card, inv.cards), pods: cardledger.NewPods[holding]()}
	for i := range d.cards {
		d.cards[i] = card{total: inv.memPerCard, healthy: inv.unhealthy == nil || !inv.unhealthy[i]}
	}
	return d
}

// apply adds (sign 1) or removes (sign -1) a holding.
func (d *Devices) apply(h holding, sign int32) {
	for _, i := range h.cards {
		c := &d.cards[i]
		if h.whole {
			c.numberPods += sign
			continue
		}
		c.sharePods += sign
		c.used += int64(sign) * h.memory
	}
}

// AddResource accounts the cards recorded in the pod's volcano.sh/gpu-index.
// Pods in phase Succeeded or Failed, pods without the annotation and pods
// asking for neither resource are ignored. A pod already accounted is a
// no-op when the allocation is the same and an error otherwise. Malformed
// annotations and invalid requests are errors naming them; the state is
// then unchanged.
func (d *Devices) AddResource(pod *v1.Pod) error {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil
	}
	value, found := pod.Annotations[gpushareproto.AnnotationGPUIndex]
	if !found {
		return nil
	}
	h, ok, err := d.decodeHolding(pod, value)
	if err != nil || !ok {
		return err
	}
	if old, found := d.pods.Get(pod); found {
		if old.equal(h) {
			return nil
		}
		return fmt.Errorf("pod %s/%s: annotation %s=%q: the pod is already accounted on cards %s of node %s",
			pod.Namespace, pod.Name, gpushareproto.AnnotationGPUIndex, value, gpushareproto.EncodeIndex(old.cards), d.node)
	}
	d.pods.Hold(pod, h, d.apply)
	if v := klog.V(5); v.Enabled() {
		v.InfoS("Accounted GPU cards", "pod", klog.KObj(pod), "node", d.node, "device", d.backend.name, "cards", value)
	}
	return nil
}

// decodeHolding reads what the pod holds according to its gpu-index value
// and its request. ok is false when the pod asks for neither resource.
func (d *Devices) decodeHolding(pod *v1.Pod, value string) (holding, bool, error) {
	mem, err := podRequest(pod, gpushareproto.ResourceGPUMemory)
	if err != nil {
		return holding{}, false, fmt.Errorf("account pod with %s=%q: %w", gpushareproto.AnnotationGPUIndex, value, err)
	}
	num, err := podRequest(pod, gpushareproto.ResourceGPUNumber)
	if err != nil {
		return holding{}, false, fmt.Errorf("account pod with %s=%q: %w", gpushareproto.AnnotationGPUIndex, value, err)
	}
	var h holding
	switch {
	case mem > 0 && num > 0:
		return holding{}, false, fmt.Errorf("pod %s/%s: annotation %s=%q: the pod asks for both %s and %s; want one",
			pod.Namespace, pod.Name, gpushareproto.AnnotationGPUIndex, value, gpushareproto.ResourceGPUMemory, gpushareproto.ResourceGPUNumber)
	case mem > 0:
		h.memory = mem
		h.cards, err = gpushareproto.DecodeIndex(value, 1, len(d.cards))
	case num > 0:
		h.whole = true
		h.cards, err = gpushareproto.DecodeIndex(value, num, len(d.cards))
	default:
		return holding{}, false, nil
	}
	if err != nil {
		return holding{}, false, fmt.Errorf("pod %s/%s on node %s: %w", pod.Namespace, pod.Name, d.node, err)
	}
	return h, true, nil
}

// SubResource removes what AddResource (or Allocate) accounted for the pod,
// as recorded then. A pod that is not accounted is a no-op (nil error).
func (d *Devices) SubResource(pod *v1.Pod) error {
	d.pods.Drop(pod, d.apply)
	return nil
}

// AddQueueResource reports what the pod holds here in this mode's resource:
// {volcano.sh/gpu-memory: request} in share mode, {volcano.sh/gpu-number:
// cards} in number mode. Nil when the pod holds nothing of this mode here.
func (d *Devices) AddQueueResource(pod *v1.Pod) map[string]float64 {
	h, found := d.pods.Get(pod)
	if !found {
		return nil
	}
	switch {
	case d.backend.mode == ModeShare && !h.whole:
		return map[string]float64{string(gpushareproto.ResourceGPUMemory): float64(h.memory)}
	case d.backend.mode == ModeNumber && h.whole:
		return map[string]float64{string(gpushareproto.ResourceGPUNumber): float64(len(h.cards))}
	}
	return nil
}

// HasDeviceRequest reports whether the pod asks for this mode's resource.
func (d *Devices) HasDeviceRequest(pod *v1.Pod) bool { return asksFor(pod, d.backend.resource) }

// GetIgnoredDevices returns nil: nodes advertise both resources, so
// Volcano's own resource fit may see them.
func (d *Devices) GetIgnoredDevices() []string { return nil }

// GetStatus renders every card as "i: used/total MiB, S shared, W whole"
// with ", unhealthy" for unhealthy cards, separated by "; ".
func (d *Devices) GetStatus() string {
	var b strings.Builder
	for i := range d.cards {
		c := &d.cards[i]
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d: %d/%d MiB, %d shared, %d whole", i, c.used, c.total, c.sharePods, c.numberPods)
		if !c.healthy {
			b.WriteString(", unhealthy")
		}
	}
	return b.String()
}

// CardStatus is one card's state, as reported by Cards.
type CardStatus struct {
	// Index is the card's index on the node.
	Index int
	// Healthy is false for cards listed in volcano.sh/gpu-unhealthy-ids.
	Healthy bool
	// TotalMemory is the card's memory (the node's gpu-memory / gpu-number).
	TotalMemory int64
	// UsedMemory is the memory held by share pods.
	UsedMemory int64
	// SharePods counts the share pods on the card.
	SharePods int
	// NumberPods counts the gpu-number pods holding the card whole.
	NumberPods int
}

// Cards returns every card's state, by index.
func (d *Devices) Cards() []CardStatus {
	out := make([]CardStatus, len(d.cards))
	for i := range d.cards {
		c := &d.cards[i]
		out[i] = CardStatus{Index: i, Healthy: c.healthy, TotalMemory: c.total, UsedMemory: c.used,
			SharePods: int(c.sharePods), NumberPods: int(c.numberPods)}
	}
	return out
}

// CardUsage reports every card for the plugin's per-card metrics: memory in
// MiB as the node advertises it, pods sharing the card (a gpu-number pod
// holds it whole and counts as using all its memory), and the number of
// pods holding cards here. Cores are not modelled in these modes (0).
func (d *Devices) CardUsage() ([]device.CardUsage, int) {
	return cardledger.Report(len(d.cards), d.cardUsage), d.pods.Len()
}

// cardUsage describes card i for CardUsage.
func (d *Devices) cardUsage(i int) (cardledger.Card, cardledger.Usage) {
	c := &d.cards[i]
	u := cardledger.Usage{UsedMiB: c.used, UsedNum: c.sharePods + c.numberPods}
	if c.numberPods > 0 {
		u.UsedMiB = c.total
	}
	return cardledger.Card{ID: strconv.Itoa(i), Healthy: c.healthy, MemMiB: c.total}, u
}

// DeepCopy returns an independent copy.
func (d *Devices) DeepCopy() device.Devices {
	return &Devices{backend: d.backend, node: d.node, cards: slices.Clone(d.cards), pods: d.pods.Clone()}
}
