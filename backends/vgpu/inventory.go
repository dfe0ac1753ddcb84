package vgpu

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/device"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// inventory is a node's decoded registration.
type inventory struct {
	source string
	cards  []vgpuproto.Card
	// initAgent says the node's agent serves vGPUs to init containers:
	// this project's (its registration has the numa field) or HAMi's,
	// whose plugin maps the entries below the pod's init container count
	// to its init containers. volcano-vgpu-device-plugin maps entry i to
	// pod.Spec.Containers[i] (pkg/plugin/vgpu/util GetNextDeviceRequest)
	// and would index past them.
	initAgent bool
	// links is the n x n pair score matrix (row-major), nil when the node
	// publishes none or it cannot be read.
	links []int32
	// cordoned marks, by card index, the cards the node's cordon
	// annotations take out of scheduling (nil: none).
	cordoned []bool
	// warnings are what was left out, for device.InventoryWarner: link scores
	// that cannot be read, and cordon entries that cordon nothing (see
	// cardfit.Cordon), the latter marked device.IgnoredSetting.
	warnings []error
}

// decodeInventory reads volcano.sh/node-vgpu-register, or HAMi's
// registration when the node has only that, and HAMi's link scores.
func (b *Backend) decodeInventory(node *v1.Node) (*inventory, error) {
	a := node.Annotations
	if vgpuproto.AgentDeleted(a[vgpuproto.AnnotationHandshake]) {
		klog.V(2).InfoS("vGPU node agent marked deleted by the handshake; the node's vGPUs are unavailable",
			"node", node.Name, "annotation", vgpuproto.AnnotationHandshake, "value", a[vgpuproto.AnnotationHandshake])
		return nil, nil
	}
	inv := &inventory{}
	var err error
	if v, ok := a[vgpuproto.AnnotationRegister]; ok {
		inv.source = vgpuproto.AnnotationRegister
		inv.cards, err = vgpuproto.DecodeRegister(v)
		inv.initAgent = vgpuproto.RegisteredWithNUMA(v)
	} else if v, ok := a[vgpuproto.AnnotationHAMiRegister]; ok {
		inv.source = vgpuproto.AnnotationHAMiRegister
		inv.cards, err = vgpuproto.DecodeHAMiRegister(v)
		inv.initAgent = true
	}
	if err != nil || inv.cards == nil {
		return nil, err
	}
	uuids := make([]string, len(inv.cards))
	for i := range inv.cards {
		uuids[i] = inv.cards[i].UUID
	}
	var cordonErrs []error
	inv.cordoned, cordonErrs = cardfit.Cordon(a, uuids, vgpuproto.AnnotationCordon, vgpuproto.AnnotationHAMiCordon)
	for _, err := range cordonErrs {
		klog.ErrorS(err, "vGPU card cordon partly ignored", "node", node.Name)
		inv.warnings = append(inv.warnings, device.IgnoredSetting{Err: err})
	}
	if s, ok := a[vgpuproto.AnnotationHAMiScore]; ok && s != "" {
		links, err := vgpuproto.DecodeScores(s, uuids)
		if err != nil {
			klog.ErrorS(err, "vGPU link scores unreadable; topology-aware placement is off for the node", "node", node.Name)
			inv.warnings = append(inv.warnings, fmt.Errorf("%w; topology-aware placement is off for the node", err))
		} else {
			inv.links = links
		}
	}
	return inv, nil
}
