package vgpu

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/backends/vgpu/inventory"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Options configure a Backend.
type Options struct {
	// Config is the nvidia: section of the device ConfigMap (resource names,
	// defaults, gpuMemoryFactor, knownMigGeometries). Nil means the defaults.
	// It is read once by New and never modified.
	Config *config.NVIDIAConfig
	// Clock stamps volcano.sh/vgpu-time and bind-time. Nil means the real clock.
	Clock clock.PassiveClock
	// ExclusiveRules are deviceshare.GPUExclusiveRules, validated (at most
	// 64, none empty): pods matching a same rule do not share a card (see
	// exclusive.go). The slice is not modified.
	ExclusiveRules []device.ExclusiveRule
}

// Backend is the HAMi vGPU device type. It is immutable after New and safe
// for concurrent use.
type Backend struct {
	clock clock.PassiveClock
	// parser reads pods' requests: the resource names, defaults,
	// gpuMemoryFactor and exclusive rules.
	parser       *request.Parser
	migCatalogue []config.AllowedMIGGeometries
	ignored      []string
	// workload is the mix the fragment policy learns (its own lock).
	workload *frag.Workload
}

var (
	_ device.Backend    = (*Backend)(nil)
	_ device.NodeLocker = (*Backend)(nil)
	_ device.Preparer   = (*Backend)(nil)
)

// New returns a Backend for the configuration.
func New(opts Options) (*Backend, error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = &config.Default().NVIDIA
	}
	p, err := request.NewParser(cfg, opts.ExclusiveRules)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		clock:        opts.Clock,
		parser:       p,
		migCatalogue: (&config.Config{NVIDIA: *cfg}).DeepCopy().NVIDIA.KnownMIGGeometries,
		workload:     frag.NewWorkload(),
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	b.ignored = []string{string(p.ResMemory), string(p.ResPercent), string(p.ResCores), string(p.ResPriority)}
	return b, nil
}

// Name returns "hamivgpu".
func (b *Backend) Name() string { return Name }

// LockName returns "hamivgpu": the node annotation volcano-vgpu-device-plugin
// removes (ReleaseNodeLock(node, "hamivgpu")) once it has served the pod, as
// Volcano v1.10's vGPU takes it.
func (b *Backend) LockName() string { return Name }

// Resources returns the configured resource names: count, memory, memory
// percentage and cores.
func (b *Backend) Resources() (count, memory, percentage, cores v1.ResourceName) {
	return b.parser.ResCount, b.parser.ResMemory, b.parser.ResPercent, b.parser.ResCores
}

// HasDeviceRequest reports whether a container of the pod names one of the
// four vGPU resources with a non-zero quantity (invalid values included, so
// that ValidateRequest can refuse them), or the pod is bound with cards
// only HAMi's scheduler recorded (it may ask for HAMi's resource names).
func (b *Backend) HasDeviceRequest(pod *v1.Pod) bool { return b.parser.Asks(pod) || placedByHAMi(pod) }

// ValidateRequest refuses requests no node could satisfy, naming the
// container, the resource or annotation, the value and what is allowed.
func (b *Backend) ValidateRequest(pod *v1.Pod) error {
	var req request.Pod
	return b.parse(pod, "", &req)
}

// InventoryKey returns what NewDevices reads: both registrations, the link
// scores, the card cordons and whether the handshake says the agent was
// deleted. The agent
// rewrites the handshake with a new time every 30 s; only its deleted state
// is part of the key, so that rewrite does not force a decode.
func (b *Backend) InventoryKey(node *v1.Node) string {
	a := node.Annotations
	reg, hami, score := a[vgpuproto.AnnotationRegister], a[vgpuproto.AnnotationHAMiRegister], a[vgpuproto.AnnotationHAMiScore]
	deleted := vgpuproto.AgentDeleted(a[vgpuproto.AnnotationHandshake])
	cordon, hamiCordon := a[vgpuproto.AnnotationCordon], a[vgpuproto.AnnotationHAMiCordon]
	if hami == "" && score == "" && !deleted && cordon == "" && hamiCordon == "" {
		return reg
	}
	flag := "-"
	if deleted {
		flag = "D"
	}
	return reg + "\x00" + hami + "\x00" + score + "\x00" + flag + "\x00" + cordon + "\x00" + hamiCordon
}

// NewDevices decodes the node's cards. It returns (nil, nil) when the node
// registers no vGPU cards (or its agent was marked deleted), and an error
// naming the annotation, the card and the problem when the registration is
// malformed; the plugin then keeps the node's vGPUs unavailable.
func (b *Backend) NewDevices(node *v1.Node) (device.Devices, error) {
	inv, err := inventory.Decode(node)
	if err != nil {
		return nil, fmt.Errorf("decode %s inventory of node %s: %w", Name, node.Name, err)
	}
	if inv == nil {
		return nil, nil
	}
	d := newDevices(b, node.Name, inv)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Decoded vGPU inventory", "node", node.Name, "cards", len(inv.Cards), "source", inv.Source,
			"topology", inv.Links != nil)
	}
	return d, nil
}
