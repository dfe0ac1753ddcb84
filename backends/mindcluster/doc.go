// Package mindcluster implements Ascend 310P vNPU scheduling as Huawei's
// MindCluster runs it (dynamic vNPUs created by MindCluster's Ascend device
// plugin), as a deviceshare backend: device.Backend with device.BatchScorer for
// cross-node scoring, and device.Devices with device.CardReporter per node. It is
// wire-compatible with Volcano's MindCluster 310P device
// (volcano-sh/volcano pkg/scheduler/api/devices/ascend/mindcluster/ascend310p/vnpu,
// and its node set-up, package vnpu310p under the deviceshare plugin's
// ascend policy: InitVNPUDevice, setNodeVNPUInfo, initVChips) and
// MindCluster's ascend-device-plugin (Ascend/mind-cluster
// component/ascend-device-plugin). The model (chip resources, templates,
// slicing, downgrade, batch ranking) is package vnpu; the labels,
// annotations and their formats are package protocol/mindclusterproto's, named
// here to say what the backend does with them.
//
// # Requests
//
// A pod labelled ring-controller.atlas=ascend-310P whose container limits
// huawei.com/npu-core asks for AI cores (upstream: checkVNPUResourcesInPod
// reads the label and the container limits). 1, 2 or 4 cores are a vNPU
// whose template vnpu.TemplateFor picks from the pod labels vnpu-level (low,
// the default, or high) and vnpu-dvpp (yes, no, null or absent): vir01;
// vir02_1c or vir02; vir04_4c_dvpp, vir04_3c_ndvpp, vir04_3c or vir04
// (upstream getResTemplateFromTaskSetting). A multiple of the node's AI
// cores per chip is that many whole chips (upstream IsResourceWholeCard:
// cores % coresPerChip == 0). Pods asking for huawei.com/npu-core without
// the label are claimed and refused with the reason, rather than left to
// wait with no explanation; upstream ignores them. Unknown vnpu-level
// values are refused too (upstream falls back to low with a warning).
//
// # Node inputs
//
//   - capacity huawei.com/npu-core: the node's AI cores (upstream
//     setTotalResAndChipNumByTemplates);
//   - label servertype, like Ascend310P-8 or Ascend310P-10-dual: the second
//     field is the AI cores per chip, so chips = capacity / that (upstream
//     getVChipCoreNum, getTotalChipNum); 310P chips have 7 AI CPUs
//     (upstream initTemplate). Upstream also reads the label accelerator
//     (huawei-Ascend310P) for the chip kind; servertype names it too, so
//     that label is not needed here;
//   - label node.kubernetes.io/npu.chip.name, like 310P3 (upstream
//     ChipTypeKey, required by setChipPropertiesFromNPUNode);
//   - annotation huawei.com/Ascend310P, the chips the device plugin offers,
//     like "Ascend310P-0,Ascend310P-1", and huawei.com/Ascend310P-Unhealthy
//     (upstream getCardIDsFromNodeAndDeviceInfo, HwPreName + chip kind +
//     UnhealthyCardSuffix);
//   - ConfigMap kube-system/mindx-dl-deviceinfo-<node>, data key
//     DeviceInfoCfg: JSON {"DeviceInfo": {"DeviceList": {...}, "UpdateTime":
//     n}, "CheckCode": hex SHA-256 of the JSON of DeviceInfo} (upstream
//     DevInfoNameSpace, DevInfoPreName, DevInfoCMKey; the device plugin's
//     NodeDeviceInfoCache, WriteDeviceInfoDataIntoCM and MakeDataHash).
//     DeviceList keys override the node's annotations of the same name
//     (upstream updateNPUNodeDeviceInfos). Upstream requires the ConfigMap;
//     here a node whose annotations hold the lists works without one, as
//     older device plugins wrote only annotations. The backend reads the
//     ConfigMap through a DeviceInfoSource (the plugin's informer), and its
//     resourceVersion is part of InventoryKey, so a new version is decoded
//     at the next session.
//
// Chips in the offered list are idle; chips the device plugin no longer
// offers because pods use them are known through those pods' allocations
// (upstream initVChips and addNPUResource rebuild them the same way) and
// forgotten when the last holder leaves.
//
// # Allocation
//
// The pod annotation huawei.com/npu-core records the choice: whole chips as
// "0,1", a vNPU as "<chip>-<template>" like "0-vir02" (upstream
// BuildNPUTopologyAnnotations, AddNPUAllocationPatch). predicate-time holds
// the allocation time in Unix nanoseconds, which the device plugin reads
// (upstream PodPredicateTime = "predicate-time", unprefixed, in both
// Volcano and the device plugin); volcano.sh/predicate-time repeats it, as
// this project's other backends stamp it. Both travel on the v1.Binding, so
// Allocate calls no API. Upstream patches the pod from Allocate.
//
// Chip choice: whole chips take the lowest idle healthy IDs; a vNPU goes to
// the healthy chip the vnpu slicing rules admit (AI cores, AI CPUs, DVPP)
// that is fullest under binpack or emptiest under spread (upstream picks the
// chip with the least free resources). A sliced chip whose confirmed vNPUs
// sit in 3 vNPU groups (the last field of huawei.com/AscendReal) takes only
// 1- and 2-core vNPUs, in 4 groups only 1-core ones (upstream
// isChipVGroupValid). When no chip admits vir02 or vir04
// for lack of AI CPUs, the pod gets vir02_1c or vir04_3c on that node
// (upstream downgradeTaskAICPU and its DowngradeCache).
//
// # One vNPU in flight per node
//
// The device plugin creates a vNPU when the kubelet allocates the pod, and
// writes huawei.com/AscendReal (and huawei.com/kltDev) on the pod, like
// "Ascend310P-2c.1cpu-105-0_3", once it has (the device plugin's
// AddPodAnnotation, ResourceNamePrefix + PodRealAlloc; Volcano's
// IsPodResUnstable reads it). Until then the vNPU is in flight. A node holding a vNPU pod without
// huawei.com/AscendReal takes no further vNPU pod; whole-chip pods, which
// create nothing, still fit. The rule is decided from the annotations the
// ledger accounts: this scheduler's assumed allocations (which never carry
// AscendReal), pods bound but not yet confirmed, and pods of other
// schedulers alike, so it holds across sessions and restarts without state
// of its own. Upstream keeps a per-node cache of in-flight templates
// (ConCache, IsNodeHasDifferentUnFinishedTask) and marks chips with
// unconfirmed pods unstable; this rule is the stricter, stateless form of
// both. Options.ConcurrentVNPUs turns it off for device plugins that create
// vNPUs concurrently. A pod that never gets its vNPU keeps the node closed
// to vNPUs until it is deleted or terminates.
//
// # Scoring
//
// BatchScore ranks the candidate nodes with vnpu.BatchScore (binpack: fewest
// free AI cores first) or vnpu.BatchScoreSpread (most first); nodes that
// need a downgrade score below all others. The plugin's BatchNodeOrderFn
// multiplies by the schedule weight. Upstream's ScoreNode returns 0.
//
// # Not needed
//
// Nodes advertise huawei.com/npu-core themselves, so the backend is no
// device.Advertiser and ignores no resource. Upstream takes no node lock for
// MindCluster vNPUs, so neither does this backend (no device.NodeLocker).
package mindcluster
