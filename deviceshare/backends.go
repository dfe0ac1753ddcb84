package deviceshare

import (
	"fmt"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deviceshare/api"
)

// DefaultBackends builds the backends the arguments enable. GPU share and
// GPU number read nothing from the device configuration; the HAMi vGPU
// backend reads its nvidia: section (nil means the defaults).
func DefaultBackends(args Args, cfg *config.Config, clk clock.PassiveClock) ([]api.Backend, error) {
	var out []api.Backend
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
		b, err := vgpu.New(vgpu.Options{Config: nvidia, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("HAMi vGPU backend: %w", err)
		}
		out = append(out, b)
	}
	if args.AscendHAMiVNPUEnable {
		return nil, fmt.Errorf("%s: the HAMi Ascend backend is not available in this build yet", ArgAscendHAMiVNPUEnable)
	}
	if args.AscendMindClusterVNPUEnable {
		return nil, fmt.Errorf("%s: the MindCluster Ascend backend is not available in this build yet", ArgAscendMindClusterVNPUEnable)
	}
	return out, nil
}
