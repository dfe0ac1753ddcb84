package agent

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

// NVMLReal selects the system's NVML library; "mock:<machine>" selects one
// of go-nvml's mock machines.
const (
	NVMLReal       = "real"
	nvmlMockPrefix = "mock:"
)

// DefaultNodeLockName is the node lock key Volcano's vGPU device takes.
const DefaultNodeLockName = "hamivgpu"

// DefaultSchedulerName is Volcano's scheduler name, the only one whose pods
// get devices unless --scheduler-names says otherwise.
const DefaultSchedulerName = "volcano"

// DefaultSocketName is the plugin's socket file, volcano-vgpu-device-plugin's.
const DefaultSocketName = "volcano-vgpu.sock"

// profile sets the agent's common flags apart.
func profile() nodeagent.Profile {
	return nodeagent.Profile{
		SocketName:      DefaultSocketName,
		ResourceExample: vgpuproto.ResourceNumber,
		Usage: nodeagent.Usage{
			SocketName:        "this plugin's socket file name in --kubelet-socket-dir",
			ResourceName:      "extended resource to advertise; empty means the config's nvidia.resourceCountName",
			ConfigFile:        "device-config.yaml file; when set, the ConfigMap is not watched",
			HandshakeInterval: "least time between two handshake reports (below 60s)",
		},
	}
}

// Options are the agent's settings, one flag each: the node agent kit's and
// the NVIDIA agent's own.
type Options struct {
	nodeagent.Options
	NVML            string
	LibvgpuHostPath string
	CacheDir        string
	// MPSRoot is the host directory of the MPS control daemon's pipe, log
	// and shm directories (cards in the mps operating mode).
	MPSRoot         string
	MetricsAddress  string
	MemoryUnit      string
	NodeLockName    string
	PassDeviceSpecs bool
	HealthRecovery  time.Duration
	CleanInterval   time.Duration
	// AllocationKeyFile holds the keys allocations must be signed with
	// (internal/allocsig); empty serves unsigned allocations.
	AllocationKeyFile string
	// SchedulerNames are the spec.schedulerName values whose pods get
	// devices; empty allows any.
	SchedulerNames []string
	// DisableHealthChecks and EnableHealthChecks are the values of
	// DP_DISABLE_HEALTHCHECKS and DP_ENABLE_HEALTHCHECKS.
	DisableHealthChecks, EnableHealthChecks string
	// MockEventsFile is the value of VGPU_MOCK_NVML_EVENTS: with
	// --nvml=mock:<machine>, a file of NVML events to inject (tests only;
	// see nvmlmock.FollowEvents). Ignored with the real library.
	MockEventsFile string
}

// NewOptions returns the defaults, reading NODE_NAME and the health-check
// variables from the environment.
func NewOptions() *Options {
	return &Options{
		Options:             nodeagent.NewOptions(profile()),
		NVML:                NVMLReal,
		LibvgpuHostPath:     "/usr/local/vgpu/libvgpu.so",
		CacheDir:            "/var/lib/vgpu",
		MPSRoot:             allocate.DefaultMPSHostRoot,
		MetricsAddress:      ":9394",
		MemoryUnit:          string(nvidia.UnitMiB),
		NodeLockName:        DefaultNodeLockName,
		HealthRecovery:      health.DefaultRecoveryAfter,
		CleanInterval:       time.Minute,
		SchedulerNames:      []string{DefaultSchedulerName},
		DisableHealthChecks: os.Getenv(health.EnvDisableHealthChecks),
		EnableHealthChecks:  os.Getenv(health.EnvEnableHealthChecks),
		MockEventsFile:      os.Getenv(nvmlmock.EnvEvents),
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	fs.StringVar(&o.NVML, "nvml", o.NVML, "NVML implementation: real, or mock:<machine> with machine one of "+strings.Join(nvmlmock.Machines(), ", "))
	fs.StringVar(&o.LibvgpuHostPath, "libvgpu-host-path", o.LibvgpuHostPath, "libvgpu.so on the host, mounted into vGPU containers")
	fs.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "host directory for the containers' shared regions and ld.so.preload")
	fs.StringVar(&o.MPSRoot, "mps-root", o.MPSRoot, "host directory of the MPS control daemon's pipe, log and shm directories, mounted into containers on cards in the mps operating mode")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "address of the Prometheus endpoint; empty disables the exporter")
	fs.StringVar(&o.MemoryUnit, "memory-unit", o.MemoryUnit, "memory unit of the annotations: mib (this project's scheduler) or factor (volcano-vgpu-device-plugin's, multiples of gpuMemoryFactor)")
	fs.StringVar(&o.NodeLockName, "node-lock-name", o.NodeLockName, "node lock annotation key released after Allocate")
	fs.BoolVar(&o.PassDeviceSpecs, "pass-device-specs", o.PassDeviceSpecs, "return /dev/nvidia* device specs from Allocate")
	fs.DurationVar(&o.HealthRecovery, "health-recovery", o.HealthRecovery, "quiet time after which an unhealthy card is healthy again; negative never")
	fs.DurationVar(&o.CleanInterval, "clean-interval", o.CleanInterval, "how often deleted pods' shared regions are removed")
	fs.StringVar(&o.AllocationKeyFile, "allocation-key-file", o.AllocationKeyFile, "file of allocation keys, one per line (the Secret the scheduler's "+
		"--allocation-key-file reads); when set, only allocations signed with one of them get devices")
	fs.StringSliceVar(&o.SchedulerNames, "scheduler-names", o.SchedulerNames, "spec.schedulerName values whose pods get devices; empty allows any scheduler")
}

// Validate checks the options; each error names the flag, the value and what
// is allowed.
func (o *Options) Validate() error {
	var p nodeagent.Problems
	o.Options.Check(&p)
	if _, err := o.mockMachine(); err != nil {
		p.Quoted("nvml", o.NVML, err.Error())
	}
	for flag, path := range map[string]string{"libvgpu-host-path": o.LibvgpuHostPath, "cache-dir": o.CacheDir, "mps-root": o.MPSRoot} {
		if !filepath.IsAbs(path) {
			p.Quoted(flag, path, "want an absolute path")
		}
	}
	if o.MetricsAddress != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
			p.Quoted("metrics-address", o.MetricsAddress, "want host:port, :port, or empty to disable")
		}
	}
	if _, err := nvidia.ParseMemoryUnit(o.MemoryUnit); err != nil {
		p.Quoted("memory-unit", o.MemoryUnit, "want mib or factor")
	}
	if msgs := validation.IsQualifiedName(o.NodeLockName); len(msgs) > 0 {
		p.Quoted("node-lock-name", o.NodeLockName, "want an annotation key: "+strings.Join(msgs, "; "))
	}
	if o.CleanInterval <= 0 {
		p.Add("clean-interval", o.CleanInterval, "want a positive duration")
	}
	if o.AllocationKeyFile != "" && !filepath.IsAbs(o.AllocationKeyFile) {
		p.Quoted("allocation-key-file", o.AllocationKeyFile, "want an absolute path, or empty to serve unsigned allocations")
	}
	for _, n := range o.SchedulerNames {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			p.Quoted("scheduler-names", n, "want scheduler names (DNS subdomains): "+strings.Join(msgs, "; "))
		}
	}
	if _, err := health.ParsePolicy(o.DisableHealthChecks, o.EnableHealthChecks); err != nil {
		p.AddErr(err)
	}
	return p.Err()
}

// mockMachine returns the mock machine of --nvml, or "" for real.
func (o *Options) mockMachine() (string, error) {
	if o.NVML == NVMLReal {
		return "", nil
	}
	m, ok := strings.CutPrefix(o.NVML, nvmlMockPrefix)
	if ok {
		for _, known := range nvmlmock.Machines() {
			if m == known {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("want %q or mock:<machine> with machine one of %s", NVMLReal, strings.Join(nvmlmock.Machines(), ", "))
}
