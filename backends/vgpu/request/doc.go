// Package request reads a pod's vGPU request for the vGPU backend
// (backends/vgpu): the resources its containers ask for and the
// annotations that shape where they go, under the device ConfigMap's
// nvidia: section and the plugin's exclusive rules (Parser). A parsed Pod
// is a plain value, read-only once parsed, whose Key identifies everything
// the card choice reads: the backend caches the last parse per pod object
// and its per-node results per Key.
//
// # Requests
//
// Per container, with the resource names of the device ConfigMap's nvidia:
// section (defaults shown):
//
//   - volcano.sh/vgpu-number: cards. Absent with memory, percentage or
//     cores present: nvidia.defaultGPUNum (1).
//   - volcano.sh/vgpu-memory: memory per card, times nvidia.gpuMemoryFactor
//     MiB.
//   - volcano.sh/vgpu-memory-percentage: memory as a percentage of each
//     chosen card, computed per card (50% is 8 GiB of a 16 GiB card and 40 GiB
//     of an 80 GiB one). Memory wins when both are given. With neither,
//     nvidia.defaultMemory MiB, or the whole card when that is 0.
//   - volcano.sh/vgpu-cores: percent of the card's SMs; default
//     nvidia.defaultCores. 100 asks for an unused card.
//
// Init containers and native sidecars (restartPolicy Always) ask the same
// way (init.go). Parse (the backend's ValidateRequest) refuses what no
// node can serve: negative, fractional or oversized values, cores or
// percentage above 100, a count of 0 with memory, unknown annotation
// values, and a container asking for fewer cards than the regular init
// container before it leaves to it (the kubelet would give it some of
// those devices, picked at random). A container's task priority
// (nvidia.resourcePriorityName, default volcano.sh/vgpu-priority) is 0 or
// 1 (priority.go).
//
// # Pod annotations read (sources; keys in protocol/vgpuproto)
//
//   - volcano.sh/vgpu-mode: hami-core | mig | mps (Volcano GPUModeAnnotation).
//   - nvidia.com/use-gputype, nvidia.com/nouse-gputype: comma-separated,
//     case-insensitive substrings of the card type (Volcano and HAMi
//     GPUInUse/GPUNoUse).
//   - volcano.sh/vgpu-use-gpuuuid, volcano.sh/vgpu-nouse-gpuuuid:
//     comma-separated card UUIDs (Volcano's names for HAMi's
//     nvidia.com/use-gpuuuid).
//   - volcano.sh/vgpu-podgroup-policy: spread keeps pods of one PodGroup
//     (scheduling.k8s.io/group-name) off the same card (Volcano
//     VGPUPodGroupPolicyAnnotation).
//   - hami.io/gpu-scheduler-policy: binpack | spread | topology-aware, the
//     card policy (HAMi); hami.io/node-scheduler-policy: binpack | spread, the
//     node policy (HAMi). Both default to deviceshare.SchedulePolicy.
//   - nvidia.com/numa-bind: true puts all cards of a container on one NUMA
//     node (HAMi NumaBind).
package request
