package mindclusterproto

import v1 "k8s.io/api/core/v1"

// Pod labels and resources.
const (
	// LabelRingController marks the pod's accelerator family; 310P pods
	// carry LabelRingController=RingController310P.
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
	// and optional suffixes ("Ascend310P-10-dual"). See ServerTypeCores.
	LabelServerType = "servertype"
	// LabelChipName is the chip model, like "310P3".
	LabelChipName = "node.kubernetes.io/npu.chip.name"
	// AnnotationFreeChips lists the chips the device plugin offers, like
	// "Ascend310P-0,Ascend310P-1". See DecodeChips.
	AnnotationFreeChips = "huawei.com/Ascend310P"
	// AnnotationUnhealthyChips lists the unhealthy chips, same format.
	AnnotationUnhealthyChips = "huawei.com/Ascend310P-Unhealthy"
	// ChipPrefix starts every chip name in those lists.
	ChipPrefix = "Ascend310P-"
	// ServerTypeKind is the first field of a 310P node's servertype label.
	ServerTypeKind = "Ascend310P"
)

// The device-info ConfigMap the device plugin keeps per node. See
// DecodeDeviceInfo.
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
	// vNPU as "<chip>-<template>" like "0-vir02". See DecodeNPUCore.
	AnnotationNPUCore = "huawei.com/npu-core"
	// AnnotationPredicateTime is the allocation time in Unix nanoseconds,
	// which MindCluster's device plugin reads to match pods to kubelet
	// allocations.
	AnnotationPredicateTime = "predicate-time"
	// AnnotationVolcanoPredicateTime carries the same time under
	// volcano.sh's prefix, as this project's other backends stamp it.
	AnnotationVolcanoPredicateTime = "volcano.sh/predicate-time"
	// AnnotationAscendReal is written by the device plugin once it has
	// created the pod's vNPU (like "Ascend310P-2c.1cpu-105-0_3"); until
	// then the vNPU is in flight. See VNPUGroup.
	AnnotationAscendReal = "huawei.com/AscendReal"
)
