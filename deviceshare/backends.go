package deviceshare

import (
	"fmt"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deviceshare/api"
)

// DefaultBackends builds the backends the arguments enable. GPU share and
// GPU number read nothing from the device configuration.
func DefaultBackends(args Args, _ *config.Config, clk clock.PassiveClock) ([]api.Backend, error) {
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
		return nil, fmt.Errorf("%s: the HAMi vGPU backend is not available in this build yet", ArgVGPUEnable)
	}
	if args.AscendHAMiVNPUEnable {
		return nil, fmt.Errorf("%s: the HAMi Ascend backend is not available in this build yet", ArgAscendHAMiVNPUEnable)
	}
	if args.AscendMindClusterVNPUEnable {
		return nil, fmt.Errorf("%s: the MindCluster Ascend backend is not available in this build yet", ArgAscendMindClusterVNPUEnable)
	}
	return out, nil
}
