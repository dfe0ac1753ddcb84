package agent

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want []string // substrings of the error; none: valid
	}{
		{name: "defaults with a node name", edit: func(o *Options) {}},
		{name: "mock NVML and a config file", edit: func(o *Options) {
			o.NVML, o.ConfigFile, o.ConfigMapName = "mock:dgxh100", "/etc/vgpu/device-config.yaml", ""
		}},
		{name: "signed allocations from any scheduler", edit: func(o *Options) {
			o.AllocationKeyFile, o.SchedulerNames = "/etc/vshare/allocation-key/key", nil
		}},
		{name: "every bad value named", edit: func(o *Options) {
			o.NodeName, o.NVML, o.KubeletSocketDir, o.SocketName = "", "mock:dgx1", "device-plugins", "kubelet.sock"
			o.ResourceName, o.ConfigMapNamespace, o.LibvgpuHostPath, o.CacheDir = "vgpu", "Kube_System", "libvgpu.so", "tmp"
			o.MetricsAddress, o.MemoryUnit, o.NodeLockName = "9394", "GiB", "bad key!"
			o.HandshakeInterval, o.StaleAfter, o.CleanInterval = time.Minute, 0, -time.Second
			o.DisableHealthChecks = "gpu"
			o.AllocationKeyFile, o.SchedulerNames = "keys", []string{"volcano", "Not A Name"}
		}, want: []string{
			`--allocation-key-file="keys": want an absolute path`, `--scheduler-names="Not A Name"`,
			`--node-name=""`, `--nvml="mock:dgx1": want "real" or mock:<machine>`, `--kubelet-socket-dir="device-plugins"`,
			`--socket-name="kubelet.sock"`, `--resource-name="vgpu"`, `--configmap-namespace="Kube_System"`,
			`--libvgpu-host-path="libvgpu.so": want an absolute path`, `--cache-dir="tmp"`, `--metrics-address="9394"`,
			`--memory-unit="GiB": want mib or factor`, `--node-lock-name="bad key!"`, `--handshake-interval=1m0s`,
			`--allocation-timeout=0s`, `--clean-interval=-1s`, `DP_DISABLE_HEALTHCHECKS="gpu"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.NodeName, o.DisableHealthChecks, o.EnableHealthChecks = "gpu-node-1", "", ""
			tc.edit(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted bad options")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
