package kubectlvshare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/kubectlvshare/report"
)

// helpText is the help text.
const helpText = `kubectl vshare: who holds which card, what is free, and why a pod waits.

Usage:
  kubectl vshare cards [--node NODE] [-l SELECTOR]      every card: model, memory, cores, pods, health, layout
  kubectl vshare pods [-n NAMESPACE | -A]               every pod's cards, bind phase and admission
  kubectl vshare fit --memory MiB [--cores PCT] [--number N] [--type MODEL]
                                                       where a pod of that shape fits now, and why not
  kubectl vshare why POD [-n NAMESPACE]                 why a pod waits and what would have to free up
  kubectl vshare quota [-n NAMESPACE | -A]              namespace quotas on shares: used/hard per resource

Flags of every command:
  -o, --output table|wide|json|yaml   output format (default table)
  -n, --namespace NAMESPACE           namespace (default: the kubeconfig context's)
      --kubeconfig FILE               kubeconfig (default: $KUBECONFIG, then ~/.kube/config)
      --context NAME                  kubeconfig context
      --request-timeout DURATION      timeout of each API request (default 30s)
      --policy binpack|spread         the scheduler's policy for fit and why (default binpack)
      --device-config FILE            device-config.yaml of the volcano-vgpu-device-config
                                      ConfigMap, when the cluster's differs from the defaults

Exit codes: 0 ok, 1 error (no cluster, forbidden, not found), 2 usage, 3 fit: fits no node.
See docs/kubectl-vshare.md.
`

// Env is what Run needs from its process.
type Env struct {
	Stdout, Stderr io.Writer
	// Connect builds the clients and the default namespace from the
	// connection flags; nil means Connect.
	Connect func(ConnectOptions) (Clients, string, error)
}

// globalOptions are the flags of every command.
type globalOptions struct {
	conn         ConnectOptions
	output       string
	policy       string
	deviceConfig string
}

func (g *globalOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&g.conn.Kubeconfig, "kubeconfig", "", "kubeconfig file")
	fs.StringVar(&g.conn.Context, "context", "", "kubeconfig context")
	fs.StringVarP(&g.conn.Namespace, "namespace", "n", "", "namespace")
	fs.DurationVar(&g.conn.Timeout, "request-timeout", 30*time.Second, "timeout of each API request")
	fs.StringVarP(&g.output, "output", "o", report.FormatTable, "output format: table, wide, json or yaml")
	fs.StringVar(&g.policy, "policy", device.PolicyBinpack, "scheduling policy for fit and why: binpack or spread")
	fs.StringVar(&g.deviceConfig, "device-config", "", "device-config.yaml of the device ConfigMap")
}

// Run runs the plugin with args (without the program name) and returns the
// exit code. Messages for people go to env.Stderr, reports to env.Stdout.
func Run(ctx context.Context, args []string, env Env) int {
	err := run(ctx, args, env)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errNoFit):
		return ExitNoFit
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprint(env.Stdout, helpText)
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "kubectl-vshare: %v\n", err)
	code := exitCode(err)
	if code == ExitUsage {
		fmt.Fprintln(env.Stderr, "Run 'kubectl vshare --help' for usage.")
	}
	return code
}

// errNoFit ends `fit` with ExitNoFit once the report is written.
var errNoFit = errors.New("fits no node")

func run(ctx context.Context, args []string, env Env) error {
	g, fs, exec, err := parseCommand(args)
	if err != nil {
		return err
	}
	cfg, err := loadDeviceConfig(g.deviceConfig)
	if err != nil {
		return err
	}
	connect := env.Connect
	if connect == nil {
		connect = Connect
	}
	clients, namespace, err := connect(g.conn)
	if err != nil {
		return err
	}
	p, err := New(clients, cfg)
	if err != nil {
		return usagef("--device-config=%s: %v", g.deviceConfig, err)
	}
	rep, err := exec.run(ctx, p, invocation{namespace: namespace, policy: g.policy, args: fs.Args()})
	if err != nil {
		return err
	}
	if err := report.Render(env.Stdout, g.output, rep); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if f, ok := rep.(*report.FitReport); ok && !f.Fits {
		return errNoFit
	}
	return nil
}

// parseCommand parses the global flags, the command and its flags, and
// checks them, all before the cluster is contacted.
func parseCommand(args []string) (*globalOptions, *pflag.FlagSet, command, error) {
	g := &globalOptions{}
	global := pflag.NewFlagSet("kubectl-vshare", pflag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.SetInterspersed(false)
	g.register(global)
	if err := global.Parse(args); err != nil {
		return nil, nil, command{}, flagError(err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		return nil, nil, command{}, usagef("no command given: want cards, pods, fit, why or quota")
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return nil, nil, command{}, pflag.ErrHelp
	}
	newCommand, ok := commands[name]
	if !ok {
		return nil, nil, command{}, usagef("unknown command %q: want cards, pods, fit, why or quota", name)
	}
	fs := pflag.NewFlagSet("kubectl-vshare "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.AddFlagSet(global)
	c := newCommand(fs)
	if err := fs.Parse(rest); err != nil {
		return nil, nil, command{}, flagError(err)
	}
	switch {
	case !report.ValidFormat(g.output):
		return nil, nil, command{}, usagef("--output=%q: want table, wide, json or yaml", g.output)
	case g.policy != device.PolicyBinpack && g.policy != device.PolicySpread:
		return nil, nil, command{}, usagef("--policy=%q: want %s or %s", g.policy, device.PolicyBinpack, device.PolicySpread)
	}
	if err := c.check(fs.Args()); err != nil {
		return nil, nil, command{}, err
	}
	return g, fs, c, nil
}

// loadDeviceConfig reads --device-config; "" means the defaults (nil).
func loadDeviceConfig(path string) (*config.Config, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--device-config: %v", err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, usagef("--device-config=%s: %v", path, err)
	}
	return cfg, nil
}

// flagError turns a flag parsing error into a usage error.
func flagError(err error) error {
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	return usagef("%v", err)
}

// invocation is what a command runs with once flags are parsed.
type invocation struct {
	namespace, policy string
	args              []string
}

// command is one subcommand: check validates its arguments before the
// cluster is contacted, run produces its report.
type command struct {
	check func(args []string) error
	run   func(ctx context.Context, p *Plugin, inv invocation) (report.Tabler, error)
}

// commands register their flags on a FlagSet and return what runs them.
var commands = map[string]func(fs *pflag.FlagSet) command{
	"cards": cardsCommand,
	"pods":  podsCommand,
	"fit":   fitCommand,
	"why":   whyCommand,
	"quota": quotaCommand,
}

func noArgs(name string) func([]string) error {
	return func(args []string) error {
		if len(args) > 0 {
			return usagef("%s takes no arguments, got %q", name, strings.Join(args, " "))
		}
		return nil
	}
}

func cardsCommand(fs *pflag.FlagSet) command {
	var o CardsOptions
	fs.StringVar(&o.Node, "node", "", "only this node")
	fs.StringVarP(&o.Selector, "selector", "l", "", "only nodes matching this label selector")
	return command{
		check: func(args []string) error {
			if o.Node != "" && o.Selector != "" {
				return usagef("--node and --selector exclude each other")
			}
			return noArgs("cards")(args)
		},
		run: func(ctx context.Context, p *Plugin, _ invocation) (report.Tabler, error) { return p.Cards(ctx, o) },
	}
}

func podsCommand(fs *pflag.FlagSet) command {
	ns := allNamespaces(fs, "pods")
	return command{
		check: noArgs("pods"),
		run: func(ctx context.Context, p *Plugin, inv invocation) (report.Tabler, error) {
			return p.Pods(ctx, PodsOptions{Namespace: ns(inv)})
		},
	}
}

func quotaCommand(fs *pflag.FlagSet) command {
	ns := allNamespaces(fs, "quotas")
	return command{
		check: noArgs("quota"),
		run: func(ctx context.Context, p *Plugin, inv invocation) (report.Tabler, error) {
			return p.Quota(ctx, QuotaOptions{Namespace: ns(inv)})
		},
	}
}

// allNamespaces adds -A/--all-namespaces and returns the namespace a
// command reads: the invocation's, or every one ("") with -A.
func allNamespaces(fs *pflag.FlagSet, what string) func(invocation) string {
	var all bool
	fs.BoolVarP(&all, "all-namespaces", "A", false, what+" of every namespace")
	return func(inv invocation) string {
		if all {
			return ""
		}
		return inv.namespace
	}
}

func fitCommand(fs *pflag.FlagSet) command {
	s := report.Shape{}
	fs.Int64Var(&s.MemoryMiB, "memory", 0, "memory per card, MiB")
	fs.Int64Var(&s.MemoryPercent, "memory-percentage", 0, "memory per card, percent (vGPU)")
	fs.Int64Var(&s.Cores, "cores", 0, "percent of each card's cores")
	fs.Int64Var(&s.Number, "number", 1, "number of cards")
	fs.StringVar(&s.Type, "type", "", "card model (vGPU, e.g. A100) or Ascend chip type (e.g. Ascend910B3)")
	fs.StringVar(&s.Mode, "mode", "", "vGPU mode (hami-core, mig) or Ascend vnpu-mode (hami-core)")
	return command{
		check: func(args []string) error {
			switch {
			case s.Number < 1:
				return usagef("--number=%d: want 1 or more cards", s.Number)
			case s.MemoryMiB < 0:
				return usagef("--memory=%d: want 0 or more MiB", s.MemoryMiB)
			case s.MemoryPercent < 0:
				return usagef("--memory-percentage=%d: want 0 or more percent of a card", s.MemoryPercent)
			case s.Cores < 0:
				return usagef("--cores=%d: want 0 or more percent of a card's cores", s.Cores)
			case s.MemoryMiB > 0 && s.MemoryPercent > 0:
				return usagef("--memory and --memory-percentage exclude each other")
			}
			return noArgs("fit")(args)
		},
		run: func(ctx context.Context, p *Plugin, inv invocation) (report.Tabler, error) {
			return p.Fit(ctx, FitOptions{Shape: s, Policy: inv.policy})
		},
	}
}

func whyCommand(*pflag.FlagSet) command {
	return command{
		check: func(args []string) error {
			if len(args) != 1 {
				return usagef("why takes one pod name, got %d arguments", len(args))
			}
			return nil
		},
		run: func(ctx context.Context, p *Plugin, inv invocation) (report.Tabler, error) {
			name := strings.TrimPrefix(strings.TrimPrefix(inv.args[0], "pod/"), "pods/")
			return p.Why(ctx, WhyOptions{Namespace: inv.namespace, Name: name, Policy: inv.policy})
		},
	}
}
