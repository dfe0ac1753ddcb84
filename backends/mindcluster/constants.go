package mindcluster

import v1 "k8s.io/api/core/v1"

// Name is the device type's name in logs, metrics and failure reasons.
const Name = "mindcluster310p"

// Pod labels and resources (see the package documentation for sources).
const (
	// LabelRingController marks the pod's accelerator family; the backend
	// serves LabelRingController=RingController310P.
	LabelRingController = "ring-controller.atlas"
	// RingController310P is the value for Atlas inference (310P) jobs.
	RingController310P = "ascend-310P"
	// LabelVNPULevel is low (the default) or high: AI CPUs per vNPU.
	LabelVNPULevel = "vnpu-level"
	// LabelVNPUDVPP is yes, no, null or absent: the vNPU's DVPP use.
	LabelVNPUDVPP = "vnpu-dvpp"
	// ResourceNPUCore is the AI cores a container asks for, and the node's
	// capacity of them.
	ResourceNPUCore v1.ResourceName = "huawei.com/npu-core"
)

// Node labels and annotations written by MindCluster's agents.
const (
	// LabelServerType is like "Ascend310P-8": chip kind, AI cores per chip
	// and optional suffixes ("Ascend310P-10-dual").
	LabelServerType = "servertype"
	// LabelChipName is the chip model, like "310P3".
	LabelChipName = "node.kubernetes.io/npu.chip.name"
	// AnnotationFreeChips lists the chips the device plugin offers, like
	// "Ascend310P-0,Ascend310P-1".
	AnnotationFreeChips = "huawei.com/Ascend310P"
	// AnnotationUnhealthyChips lists the unhealthy chips, same format.
	AnnotationUnhealthyChips = "huawei.com/Ascend310P-Unhealthy"
	// ChipPrefix starts every chip name in those lists.
	ChipPrefix = "Ascend310P-"
	// ServerTypeKind is the first field of a 310P node's servertype label.
	ServerTypeKind = "Ascend310P"
)

// The device-info ConfigMap the device plugin keeps per node.
const (
	// DeviceInfoNamespace holds the device-info ConfigMaps.
	DeviceInfoNamespace = "kube-system"
	// DeviceInfoPrefix plus the node name is the ConfigMap's name.
	DeviceInfoPrefix = "mindx-dl-deviceinfo-"
	// DeviceInfoKey is the data key holding the JSON document.
	DeviceInfoKey = "DeviceInfoCfg"
)

// Pod annotations.
const (
	// AnnotationNPUCore records the allocation: whole chips as "0,1", a
	// vNPU as "<chip>-<template>" like "0-vir02".
	AnnotationNPUCore = "huawei.com/npu-core"
	// AnnotationPredicateTime is the allocation time in Unix nanoseconds,
	// which MindCluster's device plugin reads to match pods to kubelet
	// allocations.
	AnnotationPredicateTime = "predicate-time"
	// AnnotationVolcanoPredicateTime carries the same time under this
	// project's prefix, as every other backend stamps it.
	AnnotationVolcanoPredicateTime = "volcano.sh/predicate-time"
	// AnnotationAscendReal is written by the device plugin once it has
	// created the pod's vNPU (like "Ascend310P-2c.1cpu-105-0_3"); until
	// then the vNPU is in flight.
	AnnotationAscendReal = "huawei.com/AscendReal"
)

// Failure reasons, stable across nodes so Volcano's fit-error histogram
// groups them.
const (
	// ReasonChipUnhealthy: the chip is in the unhealthy list.
	ReasonChipUnhealthy = "310P chip unhealthy"
	// ReasonChipHeldWhole: a whole-chip pod holds the chip. Resolvable.
	ReasonChipHeldWhole = "310P chip held whole by another pod"
	// ReasonChipSliced: a whole chip was asked of a chip holding vNPUs.
	// Resolvable.
	ReasonChipSliced = "310P chip already sliced into vNPUs"
	// ReasonChipAICore: too few free AI cores on the chip. Resolvable.
	ReasonChipAICore = "not enough free AI cores on 310P chip"
	// ReasonChipAICPU: too few free AI CPUs on the chip, even after a
	// downgrade. Resolvable.
	ReasonChipAICPU = "not enough free AI CPUs on 310P chip"
	// ReasonChipMemory: too little free memory on the chip. Resolvable.
	ReasonChipMemory = "not enough free memory on 310P chip"
	// ReasonChipDVPP: the chip's other vNPUs forbid the DVPP use. Resolvable.
	ReasonChipDVPP = "310P chip DVPP use conflicts with its vNPUs"
	// ReasonChipVGroups: the chip's vNPUs are spread over too many vNPU
	// groups for a vNPU of this size. Resolvable.
	ReasonChipVGroups = "310P chip's vNPU groups too fragmented for the vNPU"
	// ReasonNoFreeChips: the device plugin offers no chip and none is in use.
	ReasonNoFreeChips = "no 310P chip offered by the device plugin"
	// ReasonTooFewChips: the node has fewer chips than the pod asks for.
	ReasonTooFewChips = "fewer 310P chips on node than requested"
	// ReasonNotWholeChips: the AI cores asked are neither a vNPU template
	// (1, 2 or 4) nor whole chips of this node.
	ReasonNotWholeChips = "AI cores requested are neither a 310P vNPU nor whole chips of this node"
	// ReasonInFlight: a vNPU allocated on the node has not been created by
	// the device plugin yet; MindCluster creates one at a time per node.
	ReasonInFlight = "a 310P vNPU on the node is still being created by the device plugin"
)
