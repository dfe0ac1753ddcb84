package mindcluster

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
	"github.com/vgpushare/vshare/vnpu"
)

// Options configure a Backend.
type Options struct {
	// Source serves the device-info ConfigMaps. Nil means the node
	// annotations alone describe the chips.
	Source DeviceInfoSource
	// Clock stamps predicate-time. Nil means the real clock.
	Clock clock.PassiveClock
	// ConcurrentVNPUs lets a node take a vNPU while another of its vNPUs
	// is still being created. MindCluster's device plugin creates them one
	// at a time, so the default (false) keeps further vNPU pods off such a
	// node; a device plugin that copes with concurrent creation may turn
	// the rule off.
	ConcurrentVNPUs bool
}

// Backend is the MindCluster Ascend 310P vNPU device type. It is immutable
// after New and safe for concurrent use.
type Backend struct {
	source     DeviceInfoSource
	clock      clock.PassiveClock
	concurrent bool
}

var (
	_ device.Backend     = (*Backend)(nil)
	_ device.BatchScorer = (*Backend)(nil)
	_ device.ResultKeyer = (*Backend)(nil)
)

// New returns a Backend.
func New(opts Options) *Backend {
	b := &Backend{source: opts.Source, clock: opts.Clock, concurrent: opts.ConcurrentVNPUs}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	return b
}

// Name returns Name.
func (b *Backend) Name() string { return Name }

// HasDeviceRequest reports whether a container names huawei.com/npu-core
// with a non-zero quantity. Pods without the ring-controller.atlas label are
// claimed too, so that ValidateRequest tells their owners what is missing.
func (b *Backend) HasDeviceRequest(pod *v1.Pod) bool { return asks(pod) }

// ValidateRequest refuses requests no node can serve: AI cores that are not
// a whole number, several containers or init containers asking, a missing or
// wrong ring-controller.atlas label, unknown vnpu-level or vnpu-dvpp values,
// and core counts below a chip that are no template's (3, 5, 6, 7).
func (b *Backend) ValidateRequest(pod *v1.Pod) error {
	if !asks(pod) {
		return nil
	}
	_, err := parseRequest(pod)
	return err
}

// InventoryKey joins everything NewDevices reads: the npu-core capacity, the
// servertype and chip-name labels, the chip-list annotations and the
// device-info ConfigMap's resourceVersion (its data when it has none, as
// objects that never passed an API server).
func (b *Backend) InventoryKey(node *v1.Node) string {
	var sb strings.Builder
	if q, ok := node.Status.Capacity[mindclusterproto.ResourceNPUCore]; ok {
		sb.WriteString(q.String())
	}
	for _, v := range [...]string{node.Labels[mindclusterproto.LabelServerType], node.Labels[mindclusterproto.LabelChipName],
		node.Annotations[mindclusterproto.AnnotationFreeChips], node.Annotations[mindclusterproto.AnnotationUnhealthyChips]} {
		sb.WriteByte('|')
		sb.WriteString(v)
	}
	sb.WriteString("|cm:")
	if cm, ok := b.deviceInfo(node.Name); ok {
		if cm.ResourceVersion != "" {
			sb.WriteString(cm.ResourceVersion)
		} else {
			sb.WriteString("data:")
			sb.WriteString(cm.Data[mindclusterproto.DeviceInfoKey])
		}
	}
	return sb.String()
}

// NewDevices decodes the node's 310P chips. It returns (nil, nil) for nodes
// that are not MindCluster 310P nodes (no npu-core capacity, or another
// servertype) and an error naming the label, annotation or ConfigMap field
// when the registration is malformed.
func (b *Backend) NewDevices(node *v1.Node) (device.Devices, error) {
	if !b.is310P(node) {
		return nil, nil
	}
	inv, err := b.decodeInventory(node)
	if err != nil {
		return nil, fmt.Errorf("decode %s inventory of node %s: %w", Name, node.Name, err)
	}
	return newDevices(b, inv), nil
}

// BatchScore scores the candidate nodes the pod fits: nodes that would need
// a downgrade below every node that needs none, then (binpack) the fewest
// free AI cores first or (spread) the most, in [0, device.MaxScore]. The
// plugin multiplies by the schedule weight. Nodes the pod does not fit get
// no score.
func (b *Backend) BatchScore(pod *v1.Pod, policy string, nodes map[string]device.Devices) map[string]float64 {
	req, err := parseRequest(pod)
	if err != nil {
		return nil
	}
	cands := make([]vnpu.Candidate, 0, len(nodes))
	for name, d := range nodes {
		dd, ok := d.(*Devices)
		if !ok {
			continue
		}
		c, st := dd.fit(req, policy)
		if !st.IsSuccess() {
			continue
		}
		cands = append(cands, vnpu.Candidate{Node: name, FreeAICores: dd.freeCores(), Downgraded: c.downgraded})
	}
	if policy == device.PolicySpread {
		return vnpu.BatchScoreSpread(cands)
	}
	return vnpu.BatchScore(cands)
}
