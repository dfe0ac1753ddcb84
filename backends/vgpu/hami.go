package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// HAMi's side of the allocation. A node registered only in HAMi's format
// (hami.io/node-nvidia-register) runs HAMi's NVIDIA device plugin, which
// reads hami.io/* and never volcano.sh/*. Checked against Project-HAMi/HAMi
// (see protocol/vgpuproto hamialloc.go for the files):
//
//   - its scheduler writes hami.io/vgpu-devices-to-allocate and
//     -allocated (the same value), hami.io/vgpu-node and hami.io/vgpu-time
//     when it places the pod, then, in Bind, takes hami.io/mutex.lock on the
//     node ("<time>,<ns>,<pod>"), writes hami.io/bind-phase: allocating and
//     hami.io/bind-time, and binds;
//   - its plugin, in Allocate, finds the pod (the one the lock names, else a
//     pod on the node with bind-time, bind-phase allocating and vgpu-node =
//     the node), hands out the first entry of devices-to-allocate that has
//     cards, empties it, and once none is left sets bind-phase success and
//     removes the lock if it names that pod (failed on error, lock removed
//     too).
//
// So on such nodes Allocate writes those keys as HAMi's scheduler does and
// asks the binder for the lock (device.Reservation.NodeLocks). Of volcano.sh/*
// it keeps the durable record (vgpu-ids-new, which accounting reads),
// vgpu-node and the times, and leaves out devices-to-allocate and
// bind-phase: no agent on the node would ever consume or advance them.

// hamiAnnotations returns the allocation annotations for a HAMi-registered
// node: cards as DecodeAllocation's entries of vgpu-ids-new, after which
// HAMi's layout wants leading empty entries (the init containers' when
// cards has none for them), now the Unix time. HAMi's plugin maps the
// entries below the pod's init container count to its init containers
// (pkg/util GetNextDeviceRequest), as HAMi's scheduler writes them.
func (d *Devices) hamiAnnotations(ids string, cards [][]vgpuproto.Device, leading int, now string) map[string]string {
	hami := vgpuproto.EncodeHAMiAllocation(leading, cards)
	return map[string]string{
		vgpuproto.AnnotationIDs:            ids,
		vgpuproto.AnnotationNode:           d.node,
		vgpuproto.AnnotationTime:           now,
		vgpuproto.AnnotationBindTime:       now,
		vgpuproto.AnnotationHAMiToAllocate: hami,
		vgpuproto.AnnotationHAMiAllocated:  hami,
		vgpuproto.AnnotationHAMiNode:       d.node,
		vgpuproto.AnnotationHAMiTime:       now,
		vgpuproto.AnnotationHAMiBindPhase:  vgpuproto.BindPhaseAllocating,
		vgpuproto.AnnotationHAMiBindTime:   now,
	}
}

// placedByHAMi reports whether the pod is bound with an allocation only
// HAMi's scheduler recorded (hami.io/vgpu-devices-allocated without
// volcano.sh/vgpu-ids-new). Such a pod may ask for HAMi's resource names
// rather than ours; it holds its cards all the same.
func placedByHAMi(pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	if _, ours := pod.Annotations[vgpuproto.AnnotationIDs]; ours {
		return false
	}
	return pod.Annotations[vgpuproto.AnnotationHAMiAllocated] != ""
}

// decodeHAMiUses reads a HAMi scheduler's hami.io/vgpu-devices-allocated
// for the pod: at most one entry per container (init and regular), the
// trailing ";" aside, with the roles of the entries (vgpuproto.EntryRoles:
// HAMi v2.9 lists every init container first); only NVIDIA cards are this
// backend's (HAMi records other vendors' devices under other keys).
func (d *Devices) decodeHAMiUses(value string, pod *v1.Pod) ([]use, []vgpuproto.Role, error) {
	entries, err := vgpuproto.DecodeHAMiAllocation(vgpuproto.AnnotationHAMiAllocated, value)
	if err != nil {
		return nil, nil, err
	}
	if len(entries) > max(len(pod.Spec.InitContainers)+len(pod.Spec.Containers), 1) {
		return nil, nil, errEntries(len(entries), pod)
	}
	uses, err := d.usesOf(entries, true)
	return uses, vgpuproto.EntryRoles(pod, len(entries)), err
}
