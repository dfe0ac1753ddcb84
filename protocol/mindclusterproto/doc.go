// Package mindclusterproto is the wire protocol of Huawei MindCluster's Ascend
// 310P dynamic vNPUs between a scheduler and MindCluster's Ascend device
// plugin: the labels, resources and annotation keys, the device-info
// ConfigMap codec with its CheckCode, the chip lists, the servertype label
// and the huawei.com/npu-core allocation. The scheduler backend
// (backends/mindcluster), the plugin's ConfigMap watch (deviceshare), the
// e2e harness and the tests speak it through this package. It depends on
// nothing but the standard library and k8s.io/api.
//
// Upstream defines it in volcano-sh/volcano
// pkg/scheduler/api/devices/ascend/mindcluster/ascend310p/vnpu and the
// deviceshare plugin's vnpu310p policy (InitVNPUDevice, setNodeVNPUInfo,
// initVChips, BuildNPUTopologyAnnotations), and in MindCluster's
// ascend-device-plugin (Ascend/mind-cluster component/ascend-device-plugin:
// NodeDeviceInfoCache, WriteDeviceInfoDataIntoCM, MakeDataHash,
// AddPodAnnotation).
//
// # Pod
//
// A 310P pod is labelled ring-controller.atlas=ascend-310P and asks for AI
// cores with huawei.com/npu-core in a container's limits; the labels
// vnpu-level (low, high) and vnpu-dvpp (yes, no, null) shape its vNPU
// template.
//
// # Node
//
//   - capacity huawei.com/npu-core: the node's AI cores;
//   - label servertype, like Ascend310P-8 or Ascend310P-10-dual: the second
//     field is the AI cores per chip (ServerTypeCores);
//   - label node.kubernetes.io/npu.chip.name, like 310P3;
//   - annotations huawei.com/Ascend310P (the chips the device plugin
//     offers, like "Ascend310P-0,Ascend310P-1") and
//     huawei.com/Ascend310P-Unhealthy (DecodeChips, EncodeChips);
//   - ConfigMap kube-system/mindx-dl-deviceinfo-<node>, data key
//     DeviceInfoCfg: JSON {"DeviceInfo": {"DeviceList": {...}, "UpdateTime":
//     n}, "CheckCode": hex SHA-256 of the JSON of DeviceInfo}
//     (DecodeDeviceInfo, DeviceInfoData). DeviceList keys are the
//     annotation keys above and override the node's annotations.
//
// # Allocation
//
// The pod annotation huawei.com/npu-core records the choice: whole chips
// as "0,1", a vNPU as "<chip>-<template>" like "0-vir02" (DecodeNPUCore,
// EncodeNPUCore). predicate-time holds the allocation time in Unix
// nanoseconds, which the device plugin reads (unprefixed, in both Volcano
// and the device plugin); volcano.sh/predicate-time repeats it. Once the
// device plugin has created a vNPU it writes huawei.com/AscendReal on the
// pod, like "Ascend310P-2c.1cpu-105-0_3", whose last field is the vNPU
// group (VNPUGroup); until then the vNPU is in flight.
//
// # Limits and errors
//
// Chip IDs, vNPU groups, the servertype's cores and the document's
// UpdateTime have one spelling (digits without sign or leading zeros, the
// rule of every number of the protocols, protocol/internal/wireint), so a
// decoded value is written back byte for byte. Errors name the label,
// chip, ConfigMap or field, the value and what is allowed; whether chips
// and templates exist on the node is for the reader to check.
package mindclusterproto
