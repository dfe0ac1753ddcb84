package deviceshare

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// BackendFactory builds the enabled backends for validated arguments.
type BackendFactory func(args Args, clk clock.PassiveClock) ([]api.Backend, error)

// Options configure a State.
type Options struct {
	// Clock stamps annotations and node locks; defaults to the real clock.
	Clock clock.Clock
	// Backends builds the enabled backends; defaults to DefaultBackends.
	Backends BackendFactory
	// Registerer receives the plugin's metrics; nil disables them.
	Registerer prometheus.Registerer
}

// State is the plugin's long-lived state, created once per scheduler
// process. Volcano calls the plugin builder every session (about every
// second); each call returns a cheap plugin value that borrows this state.
//
// Locking: mu guards the backend cache and the last argument error; the
// ledger and the binder have their own locks.
type State struct {
	clock   clock.Clock
	factory BackendFactory
	ledger  *Ledger
	metrics *metrics
	binder  *Binder
	adv     *advertiser

	mu          sync.Mutex
	backendsKey string
	backends    []api.Backend
	lastArgErr  string
}

// NewState returns a State with no node known yet.
func NewState(opts Options) *State {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backends == nil {
		opts.Backends = DefaultBackends
	}
	st := &State{
		clock:   opts.Clock,
		factory: opts.Backends,
		ledger:  NewLedger(opts.Clock),
		metrics: newMetrics(opts.Registerer),
	}
	st.binder = newBinder(st)
	st.adv = newAdvertiser()
	return st
}

// Builder returns the plugin builder to register with Volcano's framework.
func (st *State) Builder() framework.PluginBuilder {
	return func(arguments framework.Arguments) framework.Plugin {
		return st.newPlugin(arguments)
	}
}

// Binder returns the pod binder that takes node locks at bind time; register
// it with cache.RegisterBindMethod.
func (st *State) Binder() cache.Binder { return st.binder }

// Close stops the State's background work (node resource advertising).
func (st *State) Close() { st.adv.stop() }

// Ledger exposes the device ledger (for tests and debugging endpoints).
func (st *State) Ledger() *Ledger { return st.ledger }

// Register creates the process's State and registers the plugin under
// PluginName, replacing Volcano's built-in plugin, and the binder that takes
// node locks. Call it once, after volcano.sh/volcano/pkg/scheduler/plugins
// has been initialised.
func Register() *State {
	st := NewState(Options{Registerer: prometheus.DefaultRegisterer})
	framework.RegisterPluginBuilder(PluginName, st.Builder())
	cache.RegisterBindMethod(st.Binder())
	return st
}

// backendsFor returns the backends for the arguments, rebuilding them only
// when the arguments that shape them change.
func (st *State) backendsFor(args Args) ([]api.Backend, error) {
	key := fmt.Sprintf("%t/%t/%t/%t/%t", args.GPUSharingEnable, args.GPUNumberEnable, args.VGPUEnable,
		args.AscendHAMiVNPUEnable, args.AscendMindClusterVNPUEnable)
	st.mu.Lock()
	defer st.mu.Unlock()
	if key == st.backendsKey && st.backends != nil {
		return st.backends, nil
	}
	backends, err := st.factory(args, st.clock)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(backends))
	for _, b := range backends {
		names = append(names, b.Name())
	}
	klog.V(2).InfoS("Device backends configured", "plugin", PluginName, "backends", names)
	st.backendsKey, st.backends = key, backends
	return backends, nil
}

// reportArgs logs an argument error once per distinct error, so a bad
// volcano-scheduler.conf does not flood the log every session.
func (st *State) reportArgs(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	st.mu.Lock()
	changed := msg != st.lastArgErr
	st.lastArgErr = msg
	st.mu.Unlock()
	st.metrics.setArgsValid(err == nil)
	if !changed {
		return
	}
	if err != nil {
		klog.ErrorS(err, "Invalid deviceshare arguments; pods asking for devices stay pending until they are fixed",
			"plugin", PluginName)
		return
	}
	klog.V(2).InfoS("Deviceshare arguments accepted", "plugin", PluginName)
}

// PluginName is the name the plugin registers under, replacing Volcano's
// built-in plugin of the same name.
const PluginName = "deviceshare"
