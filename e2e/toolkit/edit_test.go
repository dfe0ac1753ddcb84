package toolkit

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var testConfig = Config{
	SupportedDriverCapabilities: "compat32,compute,display,graphics,ngx,utility,video",
	FakeDriver: FakeDriverConfig{DeviceDir: "/run/fakegpu", LibraryDir: "/opt/stub",
		ContainerLibraryDir: DefaultContainerLibraryDir},
}

// mount is a bind mount as Edit adds it.
func mount(src, dst string, opts []string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
}

var (
	ctl     = mount("/run/fakegpu/nvidiactl", "/dev/nvidiactl", nodeOptions)
	uvm     = mount("/run/fakegpu/nvidia-uvm", "/dev/nvidia-uvm", nodeOptions)
	nvml    = mount("/opt/stub/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", libraryOptions)
	cuda    = mount("/opt/stub/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", libraryOptions)
	nvmlDep = mount("/opt/stub/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/vgpu-stub/libcuda.so.1", libraryOptions)
	card0   = mount("/run/fakegpu/nvidia0", "/dev/nvidia0", cardOptions)
	card7   = mount("/run/fakegpu/nvidia7", "/dev/nvidia7", cardOptions)
)

func TestModify(t *testing.T) {
	existing := specs.Mount{Destination: "/proc", Type: "proc", Source: "proc"}
	tests := []struct {
		name        string
		env         []string
		cfg         func(*Config)
		wantMounts  []specs.Mount
		wantChanged bool
		wantErr     error
	}{
		{name: "no GPU asked: the spec as it was", env: []string{"HOME=/"}, wantMounts: []specs.Mount{existing}},
		{name: "void: the spec as it was, even without a driver configured", env: []string{"NVIDIA_VISIBLE_DEVICES=void"},
			cfg: func(c *Config) { c.FakeDriver = FakeDriverConfig{} }, wantMounts: []specs.Mount{existing}},
		{name: "a card by UUID with the default capabilities", env: []string{"NVIDIA_VISIBLE_DEVICES=GPU-cccccccc-2222-4222-8222-222222222222"},
			wantChanged: true, wantMounts: []specs.Mount{existing, ctl, nvml, cuda, uvm, card7}},
		{name: "all cards, NVML only", env: []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility"},
			wantChanged: true, wantMounts: []specs.Mount{existing, ctl, nvml, nvmlDep, card0, mount("/run/fakegpu/nvidia1", "/dev/nvidia1", cardOptions), card7}},
		{name: "none: the capabilities without cards", env: []string{"NVIDIA_VISIBLE_DEVICES=none", "NVIDIA_DRIVER_CAPABILITIES=compute"},
			wantChanged: true, wantMounts: []specs.Mount{existing, ctl, cuda, uvm}},
		{name: "only capabilities without a library here: the nodes", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=graphics"},
			wantChanged: true, wantMounts: []specs.Mount{existing, ctl, card0}},
		{name: "another library directory in the container", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=compute"},
			cfg:         func(c *Config) { c.FakeDriver.ContainerLibraryDir = "/usr/lib64" },
			wantChanged: true, wantMounts: []specs.Mount{existing, ctl, mount("/opt/stub/libcuda.so.1", "/usr/lib64/libcuda.so.1", libraryOptions), uvm, card0}},
		{name: "no fake driver configured", env: []string{"NVIDIA_VISIBLE_DEVICES=0"},
			cfg: func(c *Config) { c.FakeDriver = FakeDriverConfig{} }, wantErr: ErrNoFakeDriver, wantMounts: []specs.Mount{existing}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			spec := &specs.Spec{Process: &specs.Process{Env: tc.env}, Mounts: []specs.Mount{existing}}
			changed, err := Modify(spec, testCards(), cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.wantMounts, spec.Mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}

// An unknown device fails the create and leaves the spec alone; so does
// a spec without a process.
func TestModifyUnknownDeviceAndNoProcess(t *testing.T) {
	spec := &specs.Spec{Process: &specs.Process{Env: []string{"NVIDIA_VISIBLE_DEVICES=GPU-ffffffff"}}}
	if changed, err := Modify(spec, testCards(), testConfig); err == nil || changed || len(spec.Mounts) != 0 {
		t.Errorf("unknown UUID: changed %v, error %v, mounts %v; want an error and no change", changed, err, spec.Mounts)
	}
	if changed, err := Modify(&specs.Spec{}, testCards(), testConfig); err != nil || changed {
		t.Errorf("no process: changed %v, error %v", changed, err)
	}
}
