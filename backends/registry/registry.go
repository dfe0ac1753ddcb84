// Package registry builds the device backends the deviceshare plugin's
// arguments enable. It sits apart from the plugin, as kube-scheduler keeps
// its in-tree registry apart from its framework: the plugin (deviceshare)
// works on the device contract alone and is handed a factory by the
// scheduler command (cmd/vc-scheduler); the admission webhook builds the
// same backends to validate pods without linking the plugin.
package registry

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/backends/mindcluster"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
)

// Build builds the backends the arguments enable. GPU share and
// GPU number read nothing from the device configuration; the HAMi vGPU
// backend reads its nvidia: section and the HAMi Ascend backends its vnpus:
// section (nil means the defaults).
//
// The plugin calls it (through Scheduler) again whenever the configuration generation changes,
// so a vnpus entry added to the ConfigMap becomes a schedulable chip type at
// the next generation without a restart. Removing an entry drops its
// backend: the ledger forgets that chip type's cards, so no new pod gets
// them, while running pods keep their cards (their annotations and the node
// agent do not change). Their usage is no longer accounted, so if the entry
// comes back, its cards are accounted again from the pods' annotations.
//
// The MindCluster 310P backend reads the device-info ConfigMaps through the
// source WithDeviceInfo gives (Scheduler's informer); without one, nodes'
// annotations alone describe their chips.
func Build(args pluginargs.Args, cfg *config.Config, clk clock.PassiveClock, opts ...Option) ([]device.Backend, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var out []device.Backend
	if args.GPUSharingEnable {
		b, err := gpushare.New(gpushare.Options{Mode: gpushare.ModeShare, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("GPU share backend: %w", err)
		}
		out = append(out, b)
	}
	if args.GPUNumberEnable {
		b, err := gpushare.New(gpushare.Options{Mode: gpushare.ModeNumber, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("GPU number backend: %w", err)
		}
		out = append(out, b)
	}
	if args.VGPUEnable {
		var nvidia *config.NVIDIAConfig
		if cfg != nil {
			nvidia = &cfg.NVIDIA
		}
		b, err := vgpu.New(vgpu.Options{Config: nvidia, Clock: clk, ExclusiveRules: args.ExclusiveRules})
		if err != nil {
			return nil, fmt.Errorf("HAMi vGPU backend: %w", err)
		}
		out = append(out, b)
	}
	if args.AscendHAMiVNPUEnable {
		bs, err := ascendBackends(cfg, clk)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	if args.AscendMindClusterVNPUEnable {
		out = append(out, mindcluster.New(mindcluster.Options{Source: o.deviceInfo, Clock: clk}))
	}
	return out, nil
}

// Option adjusts what Build builds.
type Option func(*options)

type options struct {
	deviceInfo mindcluster.DeviceInfoSource
}

// WithDeviceInfo gives the MindCluster backend its device-info ConfigMaps.
func WithDeviceInfo(src mindcluster.DeviceInfoSource) Option {
	return func(o *options) { o.deviceInfo = src }
}

// Scheduler returns the factory the scheduler command hands the plugin:
// Build, with MindCluster's device-info ConfigMaps served from one
// informer (mindcluster.DeviceInfoWatch), started with the first client the
// factory is given while the MindCluster backend is enabled and running
// until ctx ends. The factory is safe for concurrent use.
func Scheduler() func(ctx context.Context, client kubernetes.Interface, args pluginargs.Args, cfg *config.Config, clk clock.PassiveClock) ([]device.Backend, error) {
	watch := &mindcluster.DeviceInfoWatch{}
	return func(ctx context.Context, client kubernetes.Interface, args pluginargs.Args, cfg *config.Config, clk clock.PassiveClock) ([]device.Backend, error) {
		if args.AscendMindClusterVNPUEnable && client != nil {
			watch.Start(ctx, client)
		}
		return Build(args, cfg, clk, WithDeviceInfo(watch))
	}
}

// ascendBackends builds one HAMi Ascend backend per vnpus entry, in the
// configuration's order. The vnpus mode decides how nodes without the
// hami-vnpu-core annotation slice (template or hami-core: the configuration
// refuses HAMi's enpu, which is not implemented).
func ascendBackends(cfg *config.Config, clk clock.PassiveClock) ([]device.Backend, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	hamiCore := cfg.VNPUs.Mode() == config.VNPUModeHAMiCore
	out := make([]device.Backend, 0, len(cfg.VNPUs.Configs))
	for _, chip := range cfg.VNPUs.Configs {
		b, err := ascend.New(ascend.Options{Chip: chip, HAMiCore: hamiCore, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("HAMi Ascend backend %s: %w", chip.CommonWord, err)
		}
		out = append(out, b)
	}
	return out, nil
}
