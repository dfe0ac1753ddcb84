// Package agent wires the NVIDIA node agent together: NVML (real or one of
// go-nvml's mock machines), the device configuration (a file or the
// ConfigMap, watched), discovery, health, the kubelet device plugin,
// Allocate, node registration and the metrics exporter, on the node agent
// kit (nodeagent: the device-plugin server, the registrar, the session its
// parts run in). Options carries every flag with its validation, the kit's
// common ones embedded; Run runs until its context ends (SIGTERM in
// cmd/vgpu-device-plugin) and stops every part cleanly.
package agent
