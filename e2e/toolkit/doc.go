// Package toolkit is a stand-in for the NVIDIA container toolkit on a test
// node whose GPUs are the fake driver's (e2e/fakedriver): what
// nvidia-container-runtime does between containerd and runc, built as the
// real one is. containerd's runc shim runs it in runc's place (the runtime
// handler's BinaryName option) with runc's own command line; on `create` it
// edits the bundle's config.json and then runs runc with the same
// arguments, and every other command goes straight through (the toolkit's
// cmd/nvidia-container-runtime README: "When a create command is detected,
// the incoming OCI runtime specification is modified in place and the
// command is forwarded to the low-level runtime").
//
// What it injects follows NVIDIA's documentation of the environment
// variables (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html)
// and the toolkit's source where the documentation is silent
// (libnvidia-container's select_devices, the toolkit's image package):
//
//   - NVIDIA_VISIBLE_DEVICES, read from the container process's environment
//     in the spec: `all`, or a comma-separated list of GPU indices, UUIDs
//     (case-insensitive, whole) or PCI bus IDs; an unknown one fails the
//     create, as nvidia-container-cli's "unknown device" does. `none`: no
//     GPU, but the driver's capabilities. `void`, empty or unset: nothing,
//     the same as runc; unset in a legacy CUDA image (CUDA_VERSION set,
//     NVIDIA_REQUIRE_CUDA not) means `all`.
//   - NVIDIA_DRIVER_CAPABILITIES: comma-separated, `all`, or empty/unset
//     for the default `utility,compute` (unset in a legacy image: all),
//     limited to the configuration's supported-driver-capabilities.
//     `utility` is the stub libnvidia-ml.so.1, `compute` the stub
//     libcuda.so.1 and /dev/nvidia-uvm; the other capabilities have no
//     library in the fake driver and add nothing.
//   - The libraries are bind-mounted read-only where the toolkit puts the
//     driver's on a Debian-style host, /usr/lib/x86_64-linux-gnu, so that
//     dlopen("libnvidia-ml.so.1") finds them in an image without
//     ld.so.cache (glibc searches that directory by default on Debian and
//     Ubuntu). The stub NVML needs the stub libcuda; for a container
//     without `compute` it gets it in a vgpu-stub/ directory beside it,
//     which its RUNPATH names and the loader's search path does not.
//   - /dev/nvidiactl and the chosen cards' /dev/nvidia<minor> are
//     bind-mounted from the fake driver's device directory: its control
//     socket and card nodes, which gate what the container reaches
//     (fakedriver.StartDeviceNodes).
//
// The edit is a pure function over the OCI runtime spec (Edit); the
// configuration (config.go) is read from where nvidia-container-runtime
// reads its config.toml, ${XDG_CONFIG_HOME}/nvidia-container-runtime/config.toml
// when XDG_CONFIG_HOME is set, /etc/nvidia-container-runtime/config.toml
// otherwise (the README's "Configuration"). containerd passes its own
// environment to its shims, and the runc shim to the runtime binary
// (containerd's shim.Command and go-runc's command inherit os.Environ()), so
// XDG_CONFIG_HOME set for containerd reaches it.
//
// Not modelled: the toolkit's hooks (no ldconfig / update-ldcache and no
// create-symlinks hook: the stub libraries are mounted under their sonames);
// the masking of /proc/driver/nvidia for other GPUs; device cgroup rules
// (the fake nodes are files, not character devices); privileged containers
// (a privileged container on a real node gets the host's /dev, which here
// holds no fake nodes); NVIDIA_REQUIRE_* constraints; MIG devices;
// NVIDIA_VISIBLE_DEVICES passed as volume mounts; the toolkit's modes (CDI,
// CSV, legacy hook) other than editing the spec in place.
package toolkit
