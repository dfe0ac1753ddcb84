// Package app wires Volcano's scheduler command line to this project's
// deviceshare plugin. It mirrors volcano.sh/volcano/cmd/scheduler's main so
// flags, leader election, metrics and healthz behave as in stock Volcano.
package app

import (
	goflag "flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/pflag"
	_ "go.uber.org/automaxprocs" // honour container CPU quotas, as stock Volcano does
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // cloud auth providers for kubeconfigs
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	vcapp "volcano.sh/volcano/cmd/scheduler/app"
	"volcano.sh/volcano/cmd/scheduler/app/options"
	commonutil "volcano.sh/volcano/pkg/util"
	"volcano.sh/volcano/pkg/version"

	// Volcano's built-in actions and plugins register themselves in init.
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"
	_ "volcano.sh/volcano/pkg/scheduler/util/assert"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/deviceshare"
)

// Main runs the scheduler with the given arguments and returns the process
// exit code.
func Main(args []string) int {
	runtime.GOMAXPROCS(runtime.NumCPU())
	klog.InitFlags(nil)

	// Volcano's plugins package registered the built-in deviceshare in its
	// init, which has run by now; this registration replaces it.
	st := deviceshare.Register(registry.Scheduler())

	fs := pflag.CommandLine
	logFlushFreq := fs.Duration("log-flush-frequency", 5*time.Second, "Maximum number of seconds between log flushes")
	keyFile := fs.String("allocation-key-file", "", "file of allocation signing keys, one per line, the first signing "+
		"(a Secret shared with the node agents); empty signs nothing and agents holding a key refuse the allocations")
	s := options.NewServerOption()
	s.AddFlags(fs)
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)

	commonutil.LeaderElectionDefault(&s.LeaderElection)
	s.LeaderElection.ResourceName = commonutil.GenerateComponentName(s.SchedulerNames)
	componentbaseoptions.BindLeaderElectionFlags(&s.LeaderElection, fs)
	s.RegisterOptions()

	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.AddGoFlagSet(goflag.CommandLine) // klog's -v, --vmodule..., as cliflag.InitFlags does
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 2
	}

	if s.PrintVersion {
		version.PrintVersionAndExit()
		return 0
	}
	if err := s.CheckOptionOrDie(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	if s.CaCertFile != "" && s.CertFile != "" && s.KeyFile != "" {
		if err := s.ParseCAFiles(nil); err != nil {
			fmt.Fprintf(os.Stderr, "parse CA files: %v\n", err)
			return 1
		}
	}

	if *keyFile != "" {
		if err := st.SetAllocationKeyFile(*keyFile); err != nil {
			fmt.Fprintf(os.Stderr, "--allocation-key-file: %v\n", err)
			return 1
		}
	}

	klog.StartFlushDaemon(*logFlushFreq)
	defer klog.Flush()

	emptyDefaultServeMux() // the metrics port serves /metrics only (endpoints.go)
	// Run returns only when the scheduler stops, always with the reason.
	fmt.Fprintf(os.Stderr, "%v\n", vcapp.Run(s))
	return 1
}
