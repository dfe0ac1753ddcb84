package nodeagent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// Flagged is an agent's options: they register their flags.
type Flagged interface {
	AddFlags(fs *pflag.FlagSet)
}

// Main is a node agent's command, called by its main with os.Args[1:]: it
// parses args into opts with klog's flags, runs run until SIGTERM or SIGINT
// and returns the exit status, 1 when run fails (the error printed on
// stderr after name). Bad flags (and --help) exit at once with status 2, as
// pflag.ExitOnError does for every command.
func Main[O Flagged](name string, args []string, opts O, run func(context.Context, O) error) int {
	fs := pflag.NewFlagSet(name, pflag.ExitOnError)
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(args) // ExitOnError

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	defer klog.Flush()
	if err := run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}
