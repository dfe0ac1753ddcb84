package ascend

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/vnpu"
)

// Options configure a Backend.
type Options struct {
	// Chip is one entry of the device ConfigMap's vnpus section, with its
	// defaults applied (config.Parse and config.Default do that). Required.
	Chip config.VNPUConfig
	// HAMiCore is the section's mode (config.VNPUs.Mode() ==
	// config.VNPUModeHAMiCore): nodes without the hami-vnpu-core annotation
	// slice softly when true and by templates when false.
	HAMiCore bool
	// Clock stamps the time annotations. Nil means the real clock.
	Clock clock.PassiveClock
}

// Backend is the HAMi Ascend vNPU device type of one chip type (one vnpus
// entry). It is immutable after New and safe for concurrent use.
type Backend struct {
	clock    clock.PassiveClock
	name     string
	keys     ascendproto.Keys
	chip     *vnpu.Chip
	capacity int64
	factor   int64
	hamiCore bool
	network  bool

	resCount, resMemory, resCore v1.ResourceName
	ignored                      []string
}

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.NodeLocker  = (*Backend)(nil)
	_ device.ResultKeyer = (*Backend)(nil)
)

// New returns the backend of one vnpus entry, or an error naming the field
// when the entry cannot be served.
func New(opts Options) (*Backend, error) {
	c := opts.Chip
	if c.CommonWord == "" || c.ResourceName == "" || c.ResourceMemoryName == "" {
		return nil, fmt.Errorf("ascend options: vnpus entry %q: commonWord, resourceName and resourceMemoryName are required", c.ChipName)
	}
	allocatable := c.MemoryAllocatable
	if allocatable == 0 {
		allocatable = c.MemoryCapacity
	}
	templates := make([]vnpu.Template, 0, len(c.Templates))
	for _, t := range c.Templates {
		templates = append(templates, vnpu.Template{Name: t.Name,
			Resources: vnpu.Resources{MemoryMiB: t.Memory, AICore: t.AICore, AICPU: t.AICPU}, DVPP: dvppOf(t.Name)})
	}
	chip, err := vnpu.NewChip(c.ChipName, vnpu.Resources{MemoryMiB: allocatable, AICore: c.AICore, AICPU: c.AICPU}, templates)
	if err != nil {
		return nil, fmt.Errorf("ascend options: vnpus entry %s: %w", c.CommonWord, err)
	}
	b := &Backend{
		clock:     opts.Clock,
		name:      c.CommonWord,
		keys:      ascendproto.KeysFor(c.CommonWord),
		chip:      chip,
		capacity:  max(c.MemoryCapacity, allocatable),
		factor:    int64(c.MemoryFactor),
		hamiCore:  opts.HAMiCore,
		network:   strings.HasPrefix(c.CommonWord, ascend910Prefix),
		resCount:  v1.ResourceName(c.ResourceName),
		resMemory: v1.ResourceName(c.ResourceMemoryName),
		resCore:   v1.ResourceName(c.ResourceCoreName),
	}
	if b.factor <= 0 {
		b.factor = 1
	}
	if b.resCore == "" {
		b.resCore = v1.ResourceName(c.ResourceName + "-core")
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	b.ignored = []string{string(b.resMemory), string(b.resCore)}
	return b, nil
}

// dvppOf reads MindCluster's naming convention: _ndvpp uses no DVPP, _dvpp
// takes it all, any other template shares it.
func dvppOf(name string) vnpu.DVPP {
	switch {
	case strings.HasSuffix(name, "_ndvpp"):
		return vnpu.DVPPNone
	case strings.HasSuffix(name, "_dvpp"):
		return vnpu.DVPPAll
	}
	return vnpu.DVPPShared
}

// Name returns the entry's commonWord, like "Ascend910B3".
func (b *Backend) Name() string { return b.name }

// LockName returns "hami.io/mutex.lock", the lock HAMi's Ascend device
// plugin releases once it served the pod.
func (b *Backend) LockName() string { return ascendproto.NodeLockName }

// Keys returns the chip type's annotation keys.
func (b *Backend) Keys() ascendproto.Keys { return b.keys }

// Resources returns the count, memory and core resource names.
func (b *Backend) Resources() (count, memory, core v1.ResourceName) {
	return b.resCount, b.resMemory, b.resCore
}

// Chip returns the chip model and its template catalogue.
func (b *Backend) Chip() *vnpu.Chip { return b.chip }

// HasDeviceRequest reports whether a container (or init container) names
// the count, memory or core resource with a non-zero quantity.
func (b *Backend) HasDeviceRequest(pod *v1.Pod) bool { return b.asks(pod) }

// ValidateRequest refuses requests no node could satisfy, naming the
// container, the resource or annotation, the value and what is allowed.
func (b *Backend) ValidateRequest(pod *v1.Pod) error {
	var req podRequest
	return b.parse(pod, &req)
}

// InventoryKey returns what NewDevices reads: the registration, the node's
// hami-vnpu-core annotation and whether the handshake says the agent is gone.
func (b *Backend) InventoryKey(node *v1.Node) string {
	a := node.Annotations
	flag := "-"
	if ascendproto.AgentDeleted(a[b.keys.Handshake]) {
		flag = "D"
	}
	return a[b.keys.Register] + "\x00" + a[ascendproto.AnnotationNodeHAMiCore] + "\x00" + flag + "\x00" +
		a[ascendproto.AnnotationDeviceCordon]
}

// NewDevices decodes the node's cards of this chip type. It returns (nil,
// nil) when the node registers none (or its agent was marked deleted), and
// an error naming the annotation, the card and the field when the
// registration is malformed.
func (b *Backend) NewDevices(node *v1.Node) (device.Devices, error) {
	a := node.Annotations
	if ascendproto.AgentDeleted(a[b.keys.Handshake]) {
		klog.V(2).InfoS("Ascend node agent marked deleted by the handshake; the node's NPUs are unavailable",
			"node", node.Name, "annotation", b.keys.Handshake)
		return nil, nil
	}
	value, ok := a[b.keys.Register]
	if !ok {
		return nil, nil
	}
	cards, err := b.decodeRegister(value)
	if err != nil {
		return nil, fmt.Errorf("decode %s inventory of node %s: %w", b.name, node.Name, err)
	}
	if len(cards) == 0 {
		return nil, nil
	}
	soft := b.hamiCore
	if v, ok := a[ascendproto.AnnotationNodeHAMiCore]; ok {
		soft = v == "true"
	}
	ids := make([]string, len(cards))
	for i := range cards {
		ids[i] = cards[i].id
	}
	cordoned, warnings := cardfit.Cordon(a, ids, ascendproto.AnnotationDeviceCordon)
	for i := range cordoned {
		cards[i].cordoned = cordoned[i]
	}
	d := newDevices(b, node.Name, cards, soft)
	for _, err := range warnings {
		klog.ErrorS(err, "NPU card cordon partly ignored", "node", node.Name, "chip", b.name)
		d.warnings = append(d.warnings, device.IgnoredSetting{Err: err})
	}
	klog.V(4).InfoS("Decoded Ascend inventory", "node", node.Name, "chip", b.name, "cards", len(cards), "hamiCore", soft)
	return d, nil
}
