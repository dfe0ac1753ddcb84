package gpushare

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// Mode selects the device mode a Backend serves.
type Mode string

const (
	// ModeShare shares cards by memory: a pod asks for volcano.sh/gpu-memory
	// and gets part of one card.
	ModeShare Mode = "share"
	// ModeNumber hands out whole cards: a pod asks for volcano.sh/gpu-number
	// and gets that many idle cards.
	ModeNumber Mode = "number"
)

// Options configure a Backend.
type Options struct {
	// Mode is ModeShare or ModeNumber.
	Mode Mode
	// Clock stamps volcano.sh/predicate-time. Nil means the real clock.
	Clock clock.PassiveClock
}

// Backend is the GPU share or GPU number device type. It is immutable after
// New and safe for concurrent use.
type Backend struct {
	mode     Mode
	name     string
	resource v1.ResourceName
	clock    clock.PassiveClock
}

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.NodeLocker  = (*Backend)(nil)
	_ device.ResultKeyer = (*Backend)(nil)
)

// New returns a Backend for opts.Mode.
func New(opts Options) (*Backend, error) {
	b := &Backend{mode: opts.Mode, clock: opts.Clock}
	switch opts.Mode {
	case ModeShare:
		b.name, b.resource = NameShare, gpushareproto.ResourceGPUMemory
	case ModeNumber:
		b.name, b.resource = NameNumber, gpushareproto.ResourceGPUNumber
	default:
		return nil, fmt.Errorf("gpushare options: Mode=%q: want %q or %q", opts.Mode, ModeShare, ModeNumber)
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	return b, nil
}

// Name returns "gpushare" in share mode and "gpunumber" in number mode.
func (b *Backend) Name() string { return b.name }

// Mode returns the backend's mode.
func (b *Backend) Mode() Mode { return b.mode }

// Resource returns the pod resource the backend serves:
// volcano.sh/gpu-memory in share mode, volcano.sh/gpu-number in number mode.
func (b *Backend) Resource() v1.ResourceName { return b.resource }

// LockName returns the node lock annotation upstream's node agent expects
// while an allocation is in flight: "gpu" in share mode. Upstream takes no
// lock in number mode, so it returns "" there, meaning no lock.
func (b *Backend) LockName() string {
	if b.mode == ModeShare {
		return gpushareproto.LockNameShare
	}
	return ""
}

// HasDeviceRequest reports whether a container of the pod names the mode's
// resource with a non-zero quantity (invalid values included, so that
// ValidateRequest can refuse them).
func (b *Backend) HasDeviceRequest(pod *v1.Pod) bool { return asksFor(pod, b.resource) }

// ValidateRequest refuses negative, fractional and oversized quantities of
// the mode's resource, naming the container, the resource and the value, and
// pods asking for both volcano.sh/gpu-memory and volcano.sh/gpu-number.
func (b *Backend) ValidateRequest(pod *v1.Pod) error { return validateRequest(pod, b.resource) }

// InventoryKey returns the node's gpu-number and gpu-memory capacities and
// its unhealthy card list: everything NewDevices reads.
func (b *Backend) InventoryKey(node *v1.Node) string {
	var sb strings.Builder
	for _, res := range [...]v1.ResourceName{gpushareproto.ResourceGPUNumber, gpushareproto.ResourceGPUMemory} {
		if q, ok := node.Status.Capacity[res]; ok {
			sb.WriteString(q.String())
		} else {
			sb.WriteByte('-')
		}
		sb.WriteByte('|')
	}
	sb.WriteString(node.Annotations[gpushareproto.AnnotationUnhealthyIDs])
	return sb.String()
}

// NewDevices decodes the node's cards. It returns (nil, nil) when the node
// has no cards for this mode (no or zero gpu-number capacity; in share mode
// also no or zero gpu-memory), and an error for inconsistent capacities or a
// malformed volcano.sh/gpu-unhealthy-ids, so that the plugin marks the node
// unavailable for this device type with the error as the reason.
func (b *Backend) NewDevices(node *v1.Node) (device.Devices, error) {
	inv, ok, err := decodeInventory(b.mode, node)
	if err != nil {
		return nil, fmt.Errorf("decode %s inventory of node %s: %w", b.name, node.Name, err)
	}
	if !ok {
		return nil, nil
	}
	return newDevices(b, node.Name, inv), nil
}
