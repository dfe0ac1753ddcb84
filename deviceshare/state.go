package deviceshare

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/advertise"
	"github.com/vgpushare/vshare/deviceshare/bind"
	"github.com/vgpushare/vshare/deviceshare/metrics"
	"github.com/vgpushare/vshare/deviceshare/nodestate"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/deviceshare/quotawatch"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/internal/allocsig"
)

// BackendFactory builds the enabled backends for validated arguments and
// the device configuration in force (registry.Scheduler in the scheduler
// command). client is the session's API client (nil without one), for
// backends that watch objects of their own; ctx ends when the State closes.
type BackendFactory func(ctx context.Context, client kubernetes.Interface, args pluginargs.Args, cfg *config.Config,
	clk clock.PassiveClock) ([]device.Backend, error)

// Options configure a State.
type Options struct {
	// Clock stamps annotations and node locks; defaults to the real clock.
	Clock clock.Clock
	// Backends builds the enabled backends. Without it every session
	// fails to build them and pods asking for devices stay pending with
	// that error.
	Backends BackendFactory
	// Registerer receives the plugin's metrics; nil disables them.
	Registerer prometheus.Registerer
}

// State is the plugin's long-lived state, created once per scheduler
// process. Volcano calls the plugin builder every session (about every
// second); each call returns a cheap plugin value that borrows this state.
//
// Locking: mu guards the backend cache and the last argument error; the
// node state and the binder have their own locks.
type State struct {
	clock   clock.Clock
	factory BackendFactory
	nodes   *nodestate.Store
	metrics *metrics.Metrics
	binder  *bind.Binder
	adv     *advertise.Advertiser
	// quotas serves the ResourceQuotas (quota.go); it starts with the
	// first session's client.
	quotas *quotawatch.Watch

	mu          sync.Mutex
	recorder    record.EventRecorder
	configs     *config.Loader
	configsCtx  context.Context
	stopConfigs context.CancelFunc
	backendsKey string
	backends    []device.Backend
	lastArgErr  string

	// keys signs allocations (internal/allocsig); nil signs nothing.
	keys *allocsig.File
}

// SetAllocationKeyFile makes the plugin sign every allocation of a backend
// implementing device.Signed with the first key of the file, which is read
// again when it changes. The file must be valid now. Call it before the
// first session.
func (st *State) SetAllocationKeyFile(path string) error {
	f, err := allocsig.OpenFile(path)
	if err != nil {
		return err
	}
	k, _ := f.Keys()
	st.mu.Lock()
	st.keys = f
	st.mu.Unlock()
	klog.InfoS("Signing device allocations", "plugin", PluginName, "keyFile", path, "signingKey", k.IDs()[0])
	return nil
}

// signature returns the allocation signature for the pod on the node, or
// "" when no key file is set or no backend asks for one.
func (st *State) signature(pod *v1.Pod, node string, ann map[string]string, keys []string) string {
	st.mu.Lock()
	f := st.keys
	st.mu.Unlock()
	if f == nil || len(keys) == 0 {
		return ""
	}
	k, err := f.Keys()
	if err != nil {
		klog.ErrorS(err, "Allocation key file changed to something invalid; signing with the last good key", "plugin", PluginName)
	}
	return k.Sign(string(pod.UID), node, ann, keys)
}

// NewState returns a State with no node known yet.
func NewState(opts Options) *State {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Backends == nil {
		opts.Backends = func(context.Context, kubernetes.Interface, pluginargs.Args, *config.Config, clock.PassiveClock) ([]device.Backend, error) {
			return nil, errors.New("no backend factory: the scheduler command must pass one to deviceshare.Register")
		}
	}
	st := &State{
		clock:   opts.Clock,
		factory: opts.Backends,
		metrics: metrics.New(opts.Registerer),
	}
	decisions := bind.NewDecisions(opts.Clock)
	st.nodes = nodestate.New(opts.Clock, decisions)
	st.binder = bind.New(bind.Options{Clock: opts.Clock, Decisions: decisions, Inventories: st.nodes, Metrics: bind.Metrics{
		NodeLockBusy: st.metrics.NodeLockBusy, AgentWaited: st.metrics.AgentWaited, InventoryRefused: st.metrics.InventoryRefused,
	}})
	st.metrics.CollectCards(st.nodes)
	st.quotas = &quotawatch.Watch{}
	st.metrics.CollectQuotas(st.quotas)
	st.adv = advertise.New()
	st.configsCtx, st.stopConfigs = context.WithCancel(context.Background())
	return st
}

// Builder returns the plugin builder to register with Volcano's framework.
func (st *State) Builder() framework.PluginBuilder {
	return func(arguments framework.Arguments) framework.Plugin {
		return st.newPlugin(arguments)
	}
}

// Binder returns the pod binder that takes node locks at bind time; Register
// makes it the scheduler cache's binder.
func (st *State) Binder() cache.Binder { return st.binder }

var _ cache.Binder = (*bind.Binder)(nil)

// Close stops the State's background work (node resource advertising,
// the ConfigMap watches).
func (st *State) Close() {
	st.adv.Stop()
	st.stopConfigs()
}

// watchConfig returns the device configuration and its generation, starting
// the ConfigMap watch on first use and moving it when the arguments name
// another ConfigMap. Without a client only the defaults are served.
func (st *State) watchConfig(client kubernetes.Interface, args pluginargs.Args) (*config.Config, uint64) {
	st.mu.Lock()
	if st.configs == nil {
		st.configs = config.NewLoader(config.LoaderOptions{
			Client:   client,
			Recorder: st.eventRecorder(client),
			Clock:    st.clock,
		})
	}
	loader := st.configs
	st.mu.Unlock()
	if client != nil {
		if err := loader.Start(st.configsCtx, args.ConfigMapNamespace, args.ConfigMapName); err != nil {
			// The names were validated with the arguments; keep serving
			// the configuration in force.
			klog.ErrorS(err, "Cannot watch the device ConfigMap", "configMap", klog.KRef(args.ConfigMapNamespace, args.ConfigMapName))
		}
	}
	return loader.Snapshot()
}

// eventRecorder returns the State's recorder, writing events through the
// first client it is given; nil without a client. Call with st.mu held.
func (st *State) eventRecorder(client kubernetes.Interface) record.EventRecorder {
	if st.recorder == nil && client != nil {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		st.recorder = b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vc-scheduler-" + PluginName})
	}
	return st.recorder
}

// Event reasons the plugin records.
const (
	// EventInvalidRegistration is recorded on a node whose device
	// registration cannot be decoded; its devices are unavailable.
	EventInvalidRegistration = "InvalidDeviceRegistration"
	// EventDegradedRegistration is recorded on a node whose device
	// registration was read with a part left out (device.InventoryWarner);
	// its devices stay available.
	EventDegradedRegistration = "DegradedDeviceRegistration"
	// EventInvalidAllocation is recorded on a pod whose allocation
	// annotations cannot be accounted; its cards count as free.
	EventInvalidAllocation = "InvalidDeviceAllocation"
	// EventInvalidDeviceSetting is recorded on a node whose device
	// settings were partly ignored (a card cordon naming no card); its
	// devices stay in service.
	EventInvalidDeviceSetting = "InvalidDeviceSetting"
)

// reportProblems records a Warning event for each problem a node state sync
// found for the first time.
func (st *State) reportProblems(client kubernetes.Interface, problems []nodestate.Problem) {
	if len(problems) == 0 {
		return
	}
	st.mu.Lock()
	rec := st.eventRecorder(client)
	st.mu.Unlock()
	if rec == nil {
		return
	}
	for _, p := range problems {
		if p.Pod != nil {
			rec.Eventf(p.Pod, v1.EventTypeWarning, EventInvalidAllocation,
				"%s allocation on node %s cannot be accounted: %v", p.Device, p.Node, p.Err)
			continue
		}
		ref := &v1.ObjectReference{Kind: "Node", Name: p.Node, UID: types.UID(p.Node)}
		if p.Usable {
			var setting device.IgnoredSetting
			if errors.As(p.Err, &setting) {
				rec.Eventf(ref, v1.EventTypeWarning, EventInvalidDeviceSetting, "%s: %v", p.Device, p.Err)
			} else {
				rec.Eventf(ref, v1.EventTypeWarning, EventDegradedRegistration,
					"%s devices are available without part of their registration: %v", p.Device, p.Err)
			}
			continue
		}
		rec.Eventf(ref, v1.EventTypeWarning, EventInvalidRegistration,
			"%s devices are unavailable: %v", p.Device, p.Err)
	}
}

// Nodes exposes the state of every node's devices (for tests and
// debugging endpoints).
func (st *State) Nodes() *nodestate.Store { return st.nodes }

// Register creates the process's State and registers the plugin under
// PluginName, replacing Volcano's built-in plugin, and the binder that takes
// node locks. It also silences the node PATCHes of Volcano's built-in vGPU
// device code (see volcano.SilenceBuiltinVGPU). Call it once, after
// volcano.sh/volcano/pkg/scheduler/plugins has been initialised. backends
// builds the device backends (registry.Scheduler).
func Register(backends BackendFactory) *State {
	st := NewState(Options{Registerer: prometheus.DefaultRegisterer, Backends: backends})
	volcano.SilenceBuiltinVGPU()
	volcano.QuietBuiltinVGPUPodGauges()
	volcano.Register(PluginName, st.Builder(), st.Binder())
	return st
}

// backendsFor returns the backends for the arguments and configuration,
// rebuilding them only when the arguments that shape them or the
// configuration's generation change.
func (st *State) backendsFor(client kubernetes.Interface, args pluginargs.Args, cfg *config.Config, generation uint64) ([]device.Backend, error) {
	key := fmt.Sprintf("%t/%t/%t/%t/%t/%d/%s", args.GPUSharingEnable, args.GPUNumberEnable, args.VGPUEnable,
		args.AscendHAMiVNPUEnable, args.AscendMindClusterVNPUEnable, generation, pluginargs.ExclusiveKey(args.ExclusiveRules))
	st.mu.Lock()
	defer st.mu.Unlock()
	if key == st.backendsKey && st.backends != nil {
		return st.backends, nil
	}
	backends, err := st.factory(st.configsCtx, client, args, cfg, st.clock)
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
	st.metrics.SetArgsValid(err == nil)
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
const PluginName = pluginargs.PluginName
