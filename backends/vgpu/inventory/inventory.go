package inventory

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Inventory is a node's decoded registration.
type Inventory struct {
	// Source is the annotation the cards were read from:
	// vgpuproto.AnnotationRegister or AnnotationHAMiRegister.
	Source string
	// Cards are the registered cards, in registration order (the card
	// index everywhere else).
	Cards []vgpuproto.Card
	// InitAgent says the node's agent serves vGPUs to init containers:
	// this project's (its registration has the numa field) or HAMi's,
	// whose plugin maps the entries below the pod's init container count
	// to its init containers. volcano-vgpu-device-plugin maps entry i to
	// pod.Spec.Containers[i] (pkg/plugin/vgpu/util GetNextDeviceRequest)
	// and would index past them.
	InitAgent bool
	// SizedAgent says the node's agent is this project's (its registration
	// has the numa field), which serves a kubelet Allocate only to a
	// pending pod whose next entry has as many cards as asked
	// (vgpu-device-plugin/allocate, match.go). volcano-vgpu-device-plugin
	// and HAMi's plugin serve the oldest pending pod, whatever its size.
	SizedAgent bool
	// Links is the n x n pair score matrix (row-major), nil when the node
	// publishes none or it cannot be read.
	Links []int32
	// Cordoned marks, by card index, the cards the node's cordon
	// annotations take out of scheduling (nil: none).
	Cordoned []bool
	// Warnings are what was left out, for device.InventoryWarner: link scores
	// that cannot be read, and cordon entries that cordon nothing (see
	// cardfit.Cordon), the latter marked device.IgnoredSetting.
	Warnings []error
}

// Decode reads volcano.sh/node-vgpu-register, or HAMi's registration when
// the node has only that, the card cordons and HAMi's link scores. It
// returns (nil, nil) when the node registers no cards or the handshake
// says its agent was deleted, and the decoding error of a malformed
// registration.
func Decode(node *v1.Node) (*Inventory, error) {
	a := node.Annotations
	if vgpuproto.AgentDeleted(a[vgpuproto.AnnotationHandshake]) {
		klog.V(2).InfoS("vGPU node agent marked deleted by the handshake; the node's vGPUs are unavailable",
			"node", node.Name, "annotation", vgpuproto.AnnotationHandshake, "value", a[vgpuproto.AnnotationHandshake])
		return nil, nil
	}
	inv := &Inventory{}
	var err error
	if v, ok := a[vgpuproto.AnnotationRegister]; ok {
		inv.Source = vgpuproto.AnnotationRegister
		inv.Cards, err = vgpuproto.DecodeRegister(v)
		inv.InitAgent = vgpuproto.RegisteredWithNUMA(v)
		inv.SizedAgent = inv.InitAgent
	} else if v, ok := a[vgpuproto.AnnotationHAMiRegister]; ok {
		inv.Source = vgpuproto.AnnotationHAMiRegister
		inv.Cards, err = vgpuproto.DecodeHAMiRegister(v)
		inv.InitAgent = true
	}
	if err != nil || inv.Cards == nil {
		return nil, err
	}
	uuids := make([]string, len(inv.Cards))
	for i := range inv.Cards {
		uuids[i] = inv.Cards[i].UUID
	}
	var cordonErrs []error
	inv.Cordoned, cordonErrs = cardfit.Cordon(a, uuids, vgpuproto.AnnotationCordon, vgpuproto.AnnotationHAMiCordon)
	for _, err := range cordonErrs {
		klog.ErrorS(err, "vGPU card cordon partly ignored", "node", node.Name)
		inv.Warnings = append(inv.Warnings, device.IgnoredSetting{Err: err})
	}
	if s, ok := a[vgpuproto.AnnotationHAMiScore]; ok && s != "" {
		links, err := vgpuproto.DecodeScores(s, uuids)
		if err != nil {
			klog.ErrorS(err, "vGPU link scores unreadable; topology-aware placement is off for the node", "node", node.Name)
			inv.Warnings = append(inv.Warnings, fmt.Errorf("%w; topology-aware placement is off for the node", err))
		} else {
			inv.Links = links
		}
	}
	return inv, nil
}
