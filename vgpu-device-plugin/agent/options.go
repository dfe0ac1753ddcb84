package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
	"github.com/vgpushare/vshare/vgpu-device-plugin/plugin"
	"github.com/vgpushare/vshare/vgpu-device-plugin/register"
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

// Options are the agent's settings, one flag each.
type Options struct {
	NodeName           string
	NVML               string
	Kubeconfig         string
	KubeletSocketDir   string
	SocketName         string
	ResourceName       string
	ConfigFile         string
	ConfigMapNamespace string
	ConfigMapName      string
	LibvgpuHostPath    string
	CacheDir           string
	MetricsAddress     string
	MemoryUnit         string
	NodeLockName       string
	PassDeviceSpecs    bool
	HandshakeInterval  time.Duration
	StaleAfter         time.Duration
	// InformerWait bounds how long Allocate waits for a just-bound pod to
	// reach the agent's informer.
	InformerWait   time.Duration
	HealthRecovery time.Duration
	CleanInterval  time.Duration
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
		NodeName:            os.Getenv("NODE_NAME"),
		NVML:                NVMLReal,
		KubeletSocketDir:    pluginapi.DevicePluginPath,
		SocketName:          plugin.DefaultSocketName,
		ConfigMapNamespace:  config.DefaultConfigMapNamespace,
		ConfigMapName:       config.DefaultConfigMapName,
		LibvgpuHostPath:     "/usr/local/vgpu/libvgpu.so",
		CacheDir:            "/var/lib/vgpu",
		MetricsAddress:      ":9394",
		MemoryUnit:          string(nvidia.UnitMiB),
		NodeLockName:        DefaultNodeLockName,
		HandshakeInterval:   register.DefaultHandshakeInterval,
		StaleAfter:          allocate.DefaultStaleAfter,
		InformerWait:        3 * time.Second,
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
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.NVML, "nvml", o.NVML, "NVML implementation: real, or mock:<machine> with machine one of "+strings.Join(nvmlmock.Machines(), ", "))
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.KubeletSocketDir, "kubelet-socket-dir", o.KubeletSocketDir, "the kubelet's device-plugin directory (holds kubelet.sock)")
	fs.StringVar(&o.SocketName, "socket-name", o.SocketName, "this plugin's socket file name in --kubelet-socket-dir")
	fs.StringVar(&o.ResourceName, "resource-name", o.ResourceName, "extended resource to advertise; empty means the config's nvidia.resourceCountName")
	fs.StringVar(&o.ConfigFile, "config-file", o.ConfigFile, "device-config.yaml file; when set, the ConfigMap is not watched")
	fs.StringVar(&o.ConfigMapNamespace, "configmap-namespace", o.ConfigMapNamespace, "namespace of the device ConfigMap")
	fs.StringVar(&o.ConfigMapName, "configmap-name", o.ConfigMapName, "name of the device ConfigMap")
	fs.StringVar(&o.LibvgpuHostPath, "libvgpu-host-path", o.LibvgpuHostPath, "libvgpu.so on the host, mounted into vGPU containers")
	fs.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "host directory for the containers' shared regions and ld.so.preload")
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress, "address of the Prometheus endpoint; empty disables the exporter")
	fs.StringVar(&o.MemoryUnit, "memory-unit", o.MemoryUnit, "memory unit of the annotations: mib (this project's scheduler) or factor (volcano-vgpu-device-plugin's, multiples of gpuMemoryFactor)")
	fs.StringVar(&o.NodeLockName, "node-lock-name", o.NodeLockName, "node lock annotation key released after Allocate")
	fs.BoolVar(&o.PassDeviceSpecs, "pass-device-specs", o.PassDeviceSpecs, "return /dev/nvidia* device specs from Allocate")
	fs.DurationVar(&o.HandshakeInterval, "handshake-interval", o.HandshakeInterval, "least time between two handshake reports (below 60s)")
	fs.DurationVar(&o.StaleAfter, "allocation-timeout", o.StaleAfter, "refuse allocations whose bind-time is older than this")
	fs.DurationVar(&o.InformerWait, "informer-wait", o.InformerWait, "how long Allocate waits for a just-bound pod to reach the agent's informer before refusing (0..30s)")
	fs.DurationVar(&o.HealthRecovery, "health-recovery", o.HealthRecovery, "quiet time after which an unhealthy card is healthy again; negative never")
	fs.DurationVar(&o.CleanInterval, "clean-interval", o.CleanInterval, "how often deleted pods' shared regions are removed")
	fs.StringVar(&o.AllocationKeyFile, "allocation-key-file", o.AllocationKeyFile, "file of allocation keys, one per line (the Secret the scheduler's "+
		"--allocation-key-file reads); when set, only allocations signed with one of them get devices")
	fs.StringSliceVar(&o.SchedulerNames, "scheduler-names", o.SchedulerNames, "spec.schedulerName values whose pods get devices; empty allows any scheduler")
}

// Validate checks the options; each error names the flag, the value and what
// is allowed.
func (o *Options) Validate() error {
	var errs []error
	bad := func(flag string, value any, allowed string) {
		errs = append(errs, fmt.Errorf("--%s=%v: %s", flag, value, allowed))
	}
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		bad("node-name", fmt.Sprintf("%q", o.NodeName), "want a node name (set the flag or NODE_NAME): "+strings.Join(msgs, "; "))
	}
	if _, err := o.mockMachine(); err != nil {
		bad("nvml", fmt.Sprintf("%q", o.NVML), err.Error())
	}
	if !filepath.IsAbs(o.KubeletSocketDir) {
		bad("kubelet-socket-dir", fmt.Sprintf("%q", o.KubeletSocketDir), "want an absolute path")
	}
	if o.SocketName == "" || strings.ContainsRune(o.SocketName, '/') || o.SocketName == plugin.DefaultKubeletSocket {
		bad("socket-name", fmt.Sprintf("%q", o.SocketName), "want a file name other than kubelet.sock")
	}
	if o.ResourceName != "" {
		if msgs := validation.IsQualifiedName(o.ResourceName); len(msgs) > 0 || !strings.Contains(o.ResourceName, "/") {
			bad("resource-name", fmt.Sprintf("%q", o.ResourceName), "want an extended resource name like volcano.sh/vgpu-number")
		}
	}
	if o.ConfigFile == "" {
		if msgs := validation.IsDNS1123Label(o.ConfigMapNamespace); len(msgs) > 0 {
			bad("configmap-namespace", fmt.Sprintf("%q", o.ConfigMapNamespace), strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Subdomain(o.ConfigMapName); len(msgs) > 0 {
			bad("configmap-name", fmt.Sprintf("%q", o.ConfigMapName), strings.Join(msgs, "; "))
		}
	}
	for flag, p := range map[string]string{"libvgpu-host-path": o.LibvgpuHostPath, "cache-dir": o.CacheDir} {
		if !filepath.IsAbs(p) {
			bad(flag, fmt.Sprintf("%q", p), "want an absolute path")
		}
	}
	if o.MetricsAddress != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddress); err != nil {
			bad("metrics-address", fmt.Sprintf("%q", o.MetricsAddress), "want host:port, :port, or empty to disable")
		}
	}
	if _, err := nvidia.ParseMemoryUnit(o.MemoryUnit); err != nil {
		bad("memory-unit", fmt.Sprintf("%q", o.MemoryUnit), "want mib or factor")
	}
	if msgs := validation.IsQualifiedName(o.NodeLockName); len(msgs) > 0 {
		bad("node-lock-name", fmt.Sprintf("%q", o.NodeLockName), "want an annotation key: "+strings.Join(msgs, "; "))
	}
	if o.HandshakeInterval <= 0 || o.HandshakeInterval >= register.MaxHandshakeInterval {
		bad("handshake-interval", o.HandshakeInterval, "want more than 0 and less than 60s (the scheduler's deadline)")
	}
	if o.InformerWait < 0 || o.InformerWait > 30*time.Second {
		bad("informer-wait", o.InformerWait, "want a duration between 0 and 30s")
	}
	if o.StaleAfter <= 0 {
		bad("allocation-timeout", o.StaleAfter, "want a positive duration")
	}
	if o.CleanInterval <= 0 {
		bad("clean-interval", o.CleanInterval, "want a positive duration")
	}
	if o.AllocationKeyFile != "" && !filepath.IsAbs(o.AllocationKeyFile) {
		bad("allocation-key-file", fmt.Sprintf("%q", o.AllocationKeyFile), "want an absolute path, or empty to serve unsigned allocations")
	}
	for _, n := range o.SchedulerNames {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			bad("scheduler-names", fmt.Sprintf("%q", n), "want scheduler names (DNS subdomains): "+strings.Join(msgs, "; "))
		}
	}
	if _, err := health.ParsePolicy(o.DisableHealthChecks, o.EnableHealthChecks); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
