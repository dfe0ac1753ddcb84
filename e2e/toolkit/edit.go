package toolkit

import (
	"errors"
	"path"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// Names of the stub libraries in FakeDriverConfig.LibraryDir, and the
// directory beside the container's libraries where the stub NVML finds the
// stub libcuda it is built on (its RUNPATH) when the container has no
// `compute`.
const (
	libNVML     = "libnvidia-ml.so.1"
	libCUDA     = "libcuda.so.1"
	privateLibs = "vgpu-stub"
)

// ErrNoFakeDriver fails a container that asks for the driver when the
// configuration does not say where the fake driver is.
var ErrNoFakeDriver = errors.New("fake-driver.device-dir and fake-driver.library-dir are not configured")

// Mount options: libraries as nvidia-ctk's CDI specifications mount them;
// the device nodes, which are files here, bind-mounted without exec or
// setuid (the control socket writable, so that it can be connected to).
var (
	libraryOptions = []string{"ro", "nosuid", "nodev", "bind"}
	nodeOptions    = []string{"nosuid", "noexec", "bind"}
	cardOptions    = []string{"ro", "nosuid", "noexec", "bind"}
)

// Modify edits a container's spec as the toolkit would for the driver's
// cards: it reads the request from the process environment (ReadRequest)
// and adds the driver's libraries and device nodes it asks for (Edit). It
// reports whether the spec changed; an unknown device is an error and
// leaves the spec alone.
func Modify(spec *specs.Spec, cards []fakedriver.Card, cfg Config) (bool, error) {
	var env []string
	if spec.Process != nil {
		env = spec.Process.Env
	}
	req, err := ReadRequest(env, cards, splitList(cfg.SupportedDriverCapabilities))
	if err != nil {
		return false, err
	}
	return Edit(spec, req, cfg.FakeDriver)
}

// Edit adds to spec the mounts that give a container what req asks for:
// for any capability the control node as /dev/nvidiactl; for `utility`
// the stub NVML (and the stub libcuda it needs, in vgpu-stub/); for
// `compute` the stub libcuda and /dev/nvidia-uvm; and each card's node as
// /dev/nvidia<minor>. A request for nothing (void) changes nothing.
func Edit(spec *specs.Spec, req Request, cfg FakeDriverConfig) (bool, error) {
	if len(req.Capabilities) == 0 {
		return false, nil
	}
	if cfg.DeviceDir == "" || cfg.LibraryDir == "" {
		return false, ErrNoFakeDriver
	}
	libDir := cfg.ContainerLibraryDir
	if libDir == "" {
		libDir = DefaultContainerLibraryDir
	}
	var add []specs.Mount
	bind := func(src, dst string, opts []string) {
		add = append(add, specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts})
	}
	bind(path.Join(cfg.DeviceDir, fakedriver.ControlNode), "/dev/nvidiactl", nodeOptions)
	if contains(req.Capabilities, "utility") {
		bind(path.Join(cfg.LibraryDir, libNVML), path.Join(libDir, libNVML), libraryOptions)
		if !contains(req.Capabilities, "compute") {
			bind(path.Join(cfg.LibraryDir, libCUDA), path.Join(libDir, privateLibs, libCUDA), libraryOptions)
		}
	}
	if contains(req.Capabilities, "compute") {
		bind(path.Join(cfg.LibraryDir, libCUDA), path.Join(libDir, libCUDA), libraryOptions)
		bind(path.Join(cfg.DeviceDir, fakedriver.UVMNode), "/dev/nvidia-uvm", nodeOptions)
	}
	for _, c := range req.Cards {
		node := fakedriver.CardNode(c.Minor)
		bind(path.Join(cfg.DeviceDir, node), path.Join("/dev", node), cardOptions)
	}
	spec.Mounts = append(spec.Mounts, add...)
	return true, nil
}
