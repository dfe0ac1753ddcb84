// Package config holds the device configuration of the GPU/NPU sharing stack:
// the schema, defaults, validation and loader of the ConfigMap
// volcano-vgpu-device-config (key device-config.yaml). The scheduler plugin
// reads it, and so do the NVIDIA node agent and the simulated Ascend agent.
//
// # The document
//
// The YAML has the sections nvidia: (HAMi vGPU: resource names, split count,
// scaling, MIG geometries), vnpus: (the Ascend chip catalogue and templates)
// and nodeconfig: (per-node overrides for the NVIDIA node agent).
// samples/device-config.yaml shows every key with its default; Default()
// returns exactly that document.
//
// The keys are upstream's, so documents written for upstream parse here:
// Volcano's pkg/scheduler/api/devices/config (NvidiaConfig, VNPUConfig),
// volcano-vgpu-device-plugin's shipped ConfigMap, and HAMi's chart document
// (pkg/device/nvidia NvidiaConfig, pkg/device/ascend VNPUs/VNPUConfig). Where
// upstream has two forms, both parse: vnpus as a list or as
// {hamiVnpuCore, configs}, MIG layouts as {group, geometries} or as bare
// lists. HAMi's keys are accepted where something acts on them (marked "HAMi
// compatibility"; the admission webhook acts on overwriteEnv,
// runtimeClassName and the defaults). The few HAMi keys nothing here
// implements (migProfileAllowlist, migstrategy single and mixed,
// enablegetpreferredallocation false, the ENPU mode and policy, superPod)
// are parsed and then refused by validation (unsupported.go) unless they
// hold the value that matches what the product does: a key is never
// accepted only to be ignored. HAMi's sections for other vendors are ignored
// (Config.IgnoredSections), as they configure devices not scheduled here.
//
// Unlike upstream, which decodes with gopkg.in/yaml.v2 and silently drops
// unknown keys, Parse is strict: a misspelt key is an error naming its path
// and suggesting the key it most likely meant. This is deliberate: a typo in
// deviceSplitCount must not silently fall back to the default.
//
// # Parsing
//
// Parse converts YAML to JSON (sigs.k8s.io/yaml, duplicate keys rejected),
// checks the tree against the Go types (schema.go: every unknown key and
// wrongly typed value, with list indexes in the paths), decodes it into a
// Config pre-filled with the scalar defaults (so an explicit 0 can be told
// from an absent key), fills the remaining defaults (defaults.go) and
// validates (validate.go, validate_vnpu.go). Errors are field.ErrorList
// aggregates whose entries read like
//
//	nvidia.deviceSplitCount: Invalid value: 0: must be between 1 and 1000
//	vnpus[1].templates[0].memory: Invalid value: 30000: must be between 1 and the chip's memoryAllocatable (21527)
//
// # Loading
//
// A Loader is created once per process and shared. Readers call Current (or
// Snapshot) on every use: it is a lock-free atomic load, and Generation tells
// whether derived state must be rebuilt. Apply and Delete are the pure core
// (tested directly); Start wires them to a single-object informer and may be
// called again with another namespace/name. A rejected edit never replaces
// the configuration being served: it is logged, recorded as a Warning event
// (reason InvalidDeviceConfig) on the ConfigMap, and exposed by LastError and
// Status.
package config
