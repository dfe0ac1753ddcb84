package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
)

// Values of --mode.
const (
	// ModeFromConfig takes the node's mode from the ConfigMap's vnpus
	// section (hamiVnpuCore / hamiVnpuMode).
	ModeFromConfig = ""
	ModeTemplate   = config.VNPUModeTemplate
	ModeHAMiCore   = config.VNPUModeHAMiCore
)

// Options are the agent's settings, one flag each.
type Options struct {
	NodeName           string
	Kubeconfig         string
	KubeletSocketDir   string
	SocketName         string
	ConfigFile         string
	ConfigMapNamespace string
	ConfigMapName      string
	// Chip is the commonWord of the vnpus entry the node's chips follow.
	Chip         string
	ResourceName string
	Mode         string
	Chips        int
	MemoryMiB    int64
	AICore       int32
	SplitCount   int
	NUMA         []int
	NetworkIDs   []int64
	Unhealthy    []int
	HookDir      string

	HandshakeInterval time.Duration
	StaleAfter        time.Duration
	InformerWait      time.Duration
}

// NewOptions returns the defaults, reading NODE_NAME from the environment.
func NewOptions() *Options {
	return &Options{
		NodeName:           os.Getenv("NODE_NAME"),
		KubeletSocketDir:   pluginapi.DevicePluginPath,
		ConfigMapNamespace: config.DefaultConfigMapNamespace,
		ConfigMapName:      config.DefaultConfigMapName,
		Chips:              8,
		HookDir:            DefaultHookDir,
		HandshakeInterval:  DefaultHandshakeInterval,
		StaleAfter:         DefaultStaleAfter,
		InformerWait:       3 * time.Second,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.KubeletSocketDir, "kubelet-socket-dir", o.KubeletSocketDir, "the kubelet's device-plugin directory (holds kubelet.sock)")
	fs.StringVar(&o.SocketName, "socket-name", o.SocketName, "this plugin's socket file in --kubelet-socket-dir; empty means <commonWord>.sock, as HAMi's plugin")
	fs.StringVar(&o.ConfigFile, "config-file", o.ConfigFile, "device-config.yaml file; when empty the ConfigMap is read once at start (its absence means the built-in defaults)")
	fs.StringVar(&o.ConfigMapNamespace, "configmap-namespace", o.ConfigMapNamespace, "namespace of the device ConfigMap")
	fs.StringVar(&o.ConfigMapName, "configmap-name", o.ConfigMapName, "name of the device ConfigMap")
	fs.StringVar(&o.Chip, "chip", o.Chip, "commonWord of the vnpus entry the simulated chips follow, e.g. Ascend910B3 or Ascend310P (required)")
	fs.StringVar(&o.ResourceName, "resource-name", o.ResourceName, "extended resource to advertise; empty means the entry's resourceName")
	fs.StringVar(&o.Mode, "mode", o.Mode, "node mode: template or hami-core; empty means the ConfigMap's vnpus mode")
	fs.IntVar(&o.Chips, "chips", o.Chips, "number of simulated chips")
	fs.Int64Var(&o.MemoryMiB, "memory-mib", o.MemoryMiB, "memory of each chip in MiB; 0 means the entry's memoryCapacity")
	fs.Int32Var(&o.AICore, "ai-cores", o.AICore, "AI cores of each chip; 0 means the entry's aiCore")
	fs.IntVar(&o.SplitCount, "split-count", o.SplitCount, "vNPUs per chip (registered count and virtual devices per chip); 0 means HAMi's rule, memoryAllocatable over the smallest template")
	fs.IntSliceVar(&o.NUMA, "numa", o.NUMA, "NUMA node of each chip, or one value for all; empty means 0")
	fs.Int64SliceVar(&o.NetworkIDs, "network-ids", o.NetworkIDs, "NetworkID of each Ascend910 chip, or one value for all; empty means HAMi's rule (chips 0-3 in 0, others in 1; Ascend910C all in 0)")
	fs.IntSliceVar(&o.Unhealthy, "unhealthy", o.Unhealthy, "positions of chips to report unhealthy")
	fs.StringVar(&o.HookDir, "hook-dir", o.HookDir, "host directory of hami-vnpu-core named in the hami-core mounts")
	fs.DurationVar(&o.HandshakeInterval, "handshake-interval", o.HandshakeInterval, "how often the handshake is renewed (below 60s)")
	fs.DurationVar(&o.StaleAfter, "allocation-timeout", o.StaleAfter, "refuse allocations whose hami.io/bind-time is older than this")
	fs.DurationVar(&o.InformerWait, "informer-wait", o.InformerWait, "how long Allocate waits for a just-bound pod to reach the agent's informer (0..30s)")
}

// Validate checks the options that do not need the configuration; each
// error names the flag, the value and what is allowed.
func (o *Options) Validate() error {
	var errs []error
	bad := func(flag string, value any, allowed string) {
		errs = append(errs, fmt.Errorf("--%s=%v: %s", flag, value, allowed))
	}
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		bad("node-name", fmt.Sprintf("%q", o.NodeName), "want a node name (set the flag or NODE_NAME): "+strings.Join(msgs, "; "))
	}
	if o.Chip == "" || strings.ContainsAny(o.Chip, ",:;/ ") {
		bad("chip", fmt.Sprintf("%q", o.Chip), "want the commonWord of a vnpus entry, like Ascend910B3")
	}
	if !filepath.IsAbs(o.KubeletSocketDir) {
		bad("kubelet-socket-dir", fmt.Sprintf("%q", o.KubeletSocketDir), "want an absolute path")
	}
	if strings.ContainsRune(o.SocketName, '/') || o.SocketName == "kubelet.sock" {
		bad("socket-name", fmt.Sprintf("%q", o.SocketName), "want a file name other than kubelet.sock")
	}
	if o.ResourceName != "" {
		if msgs := validation.IsQualifiedName(o.ResourceName); len(msgs) > 0 || !strings.Contains(o.ResourceName, "/") {
			bad("resource-name", fmt.Sprintf("%q", o.ResourceName), "want an extended resource name like huawei.com/Ascend910B3")
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
	if o.Mode != ModeFromConfig && o.Mode != ModeTemplate && o.Mode != ModeHAMiCore {
		bad("mode", fmt.Sprintf("%q", o.Mode), "want template, hami-core or empty")
	}
	if o.Chips < 1 || o.Chips > MaxChips {
		bad("chips", o.Chips, fmt.Sprintf("want 1 to %d", MaxChips))
	}
	if o.MemoryMiB < 0 {
		bad("memory-mib", o.MemoryMiB, "want 0 (the entry's memoryCapacity) or more")
	}
	if o.AICore < 0 {
		bad("ai-cores", o.AICore, "want 0 (the entry's aiCore) or more")
	}
	if o.SplitCount < 0 {
		bad("split-count", o.SplitCount, "want 0 (HAMi's rule) or more")
	}
	if !filepath.IsAbs(o.HookDir) {
		bad("hook-dir", fmt.Sprintf("%q", o.HookDir), "want an absolute path")
	}
	if o.HandshakeInterval <= 0 || o.HandshakeInterval >= MaxHandshakeInterval {
		bad("handshake-interval", o.HandshakeInterval, "want more than 0 and less than 60s (the scheduler's deadline)")
	}
	if o.StaleAfter <= 0 {
		bad("allocation-timeout", o.StaleAfter, "want a positive duration")
	}
	if o.InformerWait < 0 || o.InformerWait > 30*time.Second {
		bad("informer-wait", o.InformerWait, "want a duration between 0 and 30s")
	}
	return errors.Join(errs...)
}

// spec builds the inventory spec from the options and the configuration;
// errors name the flag.
func (o *Options) spec(cfg *config.Config) (Spec, error) {
	entry, ok := cfg.VNPUs.Chip(o.Chip)
	if !ok {
		names := make([]string, 0, len(cfg.VNPUs.Configs))
		for _, c := range cfg.VNPUs.Configs {
			names = append(names, c.CommonWord)
		}
		return Spec{}, fmt.Errorf("--chip=%q: the device configuration has no vnpus entry with that commonWord (entries: %s)",
			o.Chip, strings.Join(names, ", "))
	}
	if o.ResourceName != "" {
		entry.ResourceName = o.ResourceName
	}
	hamiCore := cfg.VNPUs.Mode() == config.VNPUModeHAMiCore
	if o.Mode != ModeFromConfig {
		hamiCore = o.Mode == ModeHAMiCore
	}
	split := o.SplitCount
	if split == 0 && cfg.VNPUs.VNPUDeviceSplitCount > 0 {
		split = int(cfg.VNPUs.VNPUDeviceSplitCount)
	}
	return Spec{Node: o.NodeName, Entry: entry, HAMiCore: hamiCore, Count: o.Chips, MemoryMiB: o.MemoryMiB, AICore: o.AICore,
		NUMA: o.NUMA, NetworkIDs: o.NetworkIDs, Unhealthy: o.Unhealthy, SplitCount: split}, nil
}

// socketName is --socket-name or <commonWord>.sock.
func (o *Options) socketName() string {
	if o.SocketName != "" {
		return o.SocketName
	}
	return o.Chip + ".sock"
}
