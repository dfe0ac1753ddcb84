// Package schedconf reads a rendered volcano-scheduler.conf with Volcano's
// own configuration parser and the deviceshare plugin's argument parser.
//
// It is a package of its own because it links Volcano's scheduler, which
// imports Go's plugin package; that makes binaries bind every symbol at
// start, which go-nvml (the node agent's NVML binding, with symbols left to
// be resolved from the driver at run time) cannot survive. Checks of the
// node agent's command line live in package agentflags.
package schedconf

import (
	"fmt"

	"volcano.sh/volcano/pkg/scheduler"
	"volcano.sh/volcano/pkg/scheduler/framework"

	// Volcano's actions and plugins register themselves in init; the
	// configuration's action names and plugin defaults resolve through them.
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"

	"github.com/vgpushare/vshare/deviceshare/pluginargs"
)

// SchedulerArgs reads a volcano-scheduler.conf the way vc-scheduler does
// (Volcano's UnmarshalSchedulerConf: actions must exist, plugin defaults
// apply), finds the one deviceshare plugin and parses its arguments with the
// plugin's own parser. Unknown "deviceshare." keys are an error here,
// although the plugin only logs them, because a chart should not render a
// typo.
func SchedulerArgs(conf string) (pluginargs.Args, error) {
	_, tiers, _, _, err := scheduler.UnmarshalSchedulerConf(conf)
	if err != nil {
		return pluginargs.Args{}, fmt.Errorf("volcano-scheduler.conf: %w", err)
	}
	var found []framework.Arguments
	for _, tier := range tiers {
		for _, p := range tier.Plugins {
			if p.Name == pluginargs.PluginName {
				found = append(found, p.Arguments)
			}
		}
	}
	if len(found) != 1 {
		return pluginargs.Args{}, fmt.Errorf("volcano-scheduler.conf: want the %s plugin once, found it %d times", pluginargs.PluginName, len(found))
	}
	if unknown := pluginargs.UnknownKeys(found[0]); len(unknown) > 0 {
		return pluginargs.Args{}, fmt.Errorf("volcano-scheduler.conf: unknown %s arguments %v", pluginargs.PluginName, unknown)
	}
	args, err := pluginargs.Parse(found[0])
	if err != nil {
		return pluginargs.Args{}, fmt.Errorf("volcano-scheduler.conf: %w", err)
	}
	return args, nil
}
