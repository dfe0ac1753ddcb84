package agent

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent"
)

// Values of --mode.
const (
	// ModeFromConfig takes the node's mode from the ConfigMap's vnpus
	// section (hamiVnpuCore / hamiVnpuMode).
	ModeFromConfig = ""
	ModeTemplate   = config.VNPUModeTemplate
	ModeHAMiCore   = config.VNPUModeHAMiCore
)

// Options are the agent's settings, one flag each: the node agent kit's and
// the simulated chips'.
type Options struct {
	nodeagent.Options
	// Chip is the commonWord of the vnpus entry the node's chips follow.
	Chip       string
	Mode       string
	Chips      int
	MemoryMiB  int64
	AICore     int32
	SplitCount int
	NUMA       []int
	NetworkIDs []int64
	Unhealthy  []int
	HookDir    string
}

// profile sets the agent's common flags apart.
func profile() nodeagent.Profile {
	return nodeagent.Profile{
		SocketNameOptional: true,
		ResourceExample:    "huawei.com/Ascend910B3",
		Usage: nodeagent.Usage{
			SocketName:        "this plugin's socket file in --kubelet-socket-dir; empty means <commonWord>.sock, as HAMi's plugin",
			ResourceName:      "extended resource to advertise; empty means the entry's resourceName",
			ConfigFile:        "device-config.yaml file; when empty the ConfigMap is read once at start (its absence means the built-in defaults)",
			HandshakeInterval: "how often the handshake is renewed (below 60s)",
		},
	}
}

// NewOptions returns the defaults, reading NODE_NAME from the environment.
func NewOptions() *Options {
	return &Options{
		Options: nodeagent.NewOptions(profile()),
		Chips:   8,
		HookDir: DefaultHookDir,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Options.AddFlags(fs)
	fs.StringVar(&o.Chip, "chip", o.Chip, "commonWord of the vnpus entry the simulated chips follow, e.g. Ascend910B3 or Ascend310P (required)")
	fs.StringVar(&o.Mode, "mode", o.Mode, "node mode: template or hami-core; empty means the ConfigMap's vnpus mode")
	fs.IntVar(&o.Chips, "chips", o.Chips, "number of simulated chips")
	fs.Int64Var(&o.MemoryMiB, "memory-mib", o.MemoryMiB, "memory of each chip in MiB; 0 means the entry's memoryCapacity")
	fs.Int32Var(&o.AICore, "ai-cores", o.AICore, "AI cores of each chip; 0 means the entry's aiCore")
	fs.IntVar(&o.SplitCount, "split-count", o.SplitCount, "vNPUs per chip (registered count and virtual devices per chip); 0 means HAMi's rule, memoryAllocatable over the smallest template")
	fs.IntSliceVar(&o.NUMA, "numa", o.NUMA, "NUMA node of each chip, or one value for all; empty means 0")
	fs.Int64SliceVar(&o.NetworkIDs, "network-ids", o.NetworkIDs, "NetworkID of each Ascend910 chip, or one value for all; empty means HAMi's rule (chips 0-3 in 0, others in 1; Ascend910C all in 0)")
	fs.IntSliceVar(&o.Unhealthy, "unhealthy", o.Unhealthy, "positions of chips to report unhealthy")
	fs.StringVar(&o.HookDir, "hook-dir", o.HookDir, "host directory of hami-vnpu-core named in the hami-core mounts")
}

// Validate checks the options that do not need the configuration; each
// error names the flag, the value and what is allowed.
func (o *Options) Validate() error {
	var p nodeagent.Problems
	o.Options.Check(&p)
	if o.Chip == "" || strings.ContainsAny(o.Chip, ",:;/ ") {
		p.Quoted("chip", o.Chip, "want the commonWord of a vnpus entry, like Ascend910B3")
	}
	if o.Mode != ModeFromConfig && o.Mode != ModeTemplate && o.Mode != ModeHAMiCore {
		p.Quoted("mode", o.Mode, "want template, hami-core or empty")
	}
	if o.Chips < 1 || o.Chips > MaxChips {
		p.Add("chips", o.Chips, fmt.Sprintf("want 1 to %d", MaxChips))
	}
	if o.MemoryMiB < 0 {
		p.Add("memory-mib", o.MemoryMiB, "want 0 (the entry's memoryCapacity) or more")
	}
	if o.AICore < 0 {
		p.Add("ai-cores", o.AICore, "want 0 (the entry's aiCore) or more")
	}
	if o.SplitCount < 0 {
		p.Add("split-count", o.SplitCount, "want 0 (HAMi's rule) or more")
	}
	if !filepath.IsAbs(o.HookDir) {
		p.Quoted("hook-dir", o.HookDir, "want an absolute path")
	}
	return p.Err()
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
