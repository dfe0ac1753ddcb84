// Package agentflags reads a node agent command line with the agent's own
// flag set and validation (vgpu-device-plugin/agent), and lists the agent's
// flags for the documentation check. It must not be linked with Volcano's
// scheduler (see package schedconf).
package agentflags

import (
	goflag "flag"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
)

// Options parses a node agent command line (container args, without
// the program name) as cmd/vgpu-device-plugin does, with env as the
// container's environment (NODE_NAME and the health-check variables), and
// validates the result. klog's flags are accepted as the agent accepts
// them; parsing -v sets this process's klog verbosity.
func Options(args []string, env map[string]string) (*agent.Options, error) {
	opts := agent.NewOptions()
	opts.NodeName = env["NODE_NAME"]
	opts.DisableHealthChecks = env[health.EnvDisableHealthChecks]
	opts.EnableHealthChecks = env[health.EnvEnableHealthChecks]
	fs := pflag.NewFlagSet("vgpu-device-plugin", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	opts.AddFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("vgpu-device-plugin %s: %w", strings.Join(args, " "), err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("vgpu-device-plugin: unexpected arguments %q", fs.Args())
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("vgpu-device-plugin %s: %w", strings.Join(args, " "), err)
	}
	return opts, nil
}

// Flags returns the names of the node agent's own flags (klog's left
// out), in the order the agent registers them.
func Flags() []string {
	fs := pflag.NewFlagSet("vgpu-device-plugin", pflag.ContinueOnError)
	agent.NewOptions().AddFlags(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}
