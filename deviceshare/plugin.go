package deviceshare

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/fitcache"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// plugin is one session's plugin value. It is created by Volcano every
// session and borrows the long-lived State.
type plugin struct {
	st      *State
	args    pluginargs.Args
	argsErr error
	sess    *sessionState
	// ssn is the session the plugin serves, for job priorities and queues.
	ssn *framework.Session
}

var _ framework.Plugin = (*plugin)(nil)

func (st *State) newPlugin(arguments framework.Arguments) *plugin {
	args, err := pluginargs.Parse(arguments)
	if unknown := pluginargs.UnknownKeys(arguments); len(unknown) > 0 && err == nil {
		klog.V(4).InfoS("Ignoring unknown deviceshare arguments", "keys", unknown)
	}
	return &plugin{st: st, args: args, argsErr: err}
}

// Name returns the plugin name.
func (p *plugin) Name() string { return PluginName }

// OnSessionOpen brings the node state up to date with the session's snapshot and
// registers the plugin's functions.
func (p *plugin) OnSessionOpen(ssn *framework.Session) {
	start := p.st.clock.Now()
	p.st.reportArgs(p.argsErr)
	if p.argsErr != nil {
		p.registerMisconfigured(ssn)
		return
	}
	if !p.args.AnyEnabled() {
		return
	}
	cfg, generation := p.st.watchConfig(ssn.KubeClient(), p.args)
	backends, err := p.st.backendsFor(ssn.KubeClient(), p.args, cfg, generation)
	if err != nil {
		p.argsErr = err
		p.st.reportArgs(err)
		p.registerMisconfigured(ssn)
		return
	}
	res := p.st.nodes.Sync(ssn.Nodes, backends)
	p.st.reportProblems(ssn.KubeClient(), res.Problems)
	p.ssn = ssn
	p.sess = p.st.newSessionState(p.args, backends, ssn)
	p.sess.queues = p.openQueues(ssn)
	p.sess.quotas = p.openQuotas(ssn)
	p.explainInvalidRequests(ssn)
	p.st.adv.Observe(ssn.KubeClient(), ssn.Nodes, p.sess.advertisedTotals)
	p.st.binder.FollowPods(ssn.InformerFactory())
	p.st.binder.Inherit(ssn.Nodes, backends, p.sess.agentClasses)
	p.register(ssn)
	p.st.metrics.ObserveSync(res, p.st.clock.Since(start))
	klog.V(3).InfoS("Device ledger synced", "plugin", PluginName, "nodes", res.Nodes, "decoded", res.Decoded,
		"added", res.Added, "removed", res.Removed, "rejected", res.Rejected, "assumed", res.Assumed,
		"confirmed", res.Confirmed, "dropped", res.Dropped, "duration", p.st.clock.Since(start))
}

// OnSessionClose drops the session's state; assumptions already live in the
// node state.
func (p *plugin) OnSessionClose(ssn *framework.Session) {
	if p.sess != nil {
		klog.V(3).InfoS("Device session closed", "plugin", PluginName, "allocations", len(p.sess.allocs),
			"evictions", len(p.sess.evicted))
		p.reportQueueUsage(ssn)
		p.st.quotas.Record(p.sess.quotas.samples())
	}
	p.sess = nil
	p.ssn = nil
}

func (p *plugin) register(ssn *framework.Session) {
	ssn.AddPredicateFn(PluginName, p.predicate)
	ssn.AddNodeOrderFn(PluginName, p.nodeOrder)
	ssn.AddBatchNodeOrderFn(PluginName, p.batchNodeOrder)
	ssn.AddPrePredicateFn(PluginName, p.prePredicate)
	ssn.AddPreemptableFn(PluginName, p.preemptable)
	ssn.AddReclaimableFn(PluginName, p.reclaimable)
	ssn.AddAllocatableFn(PluginName, p.allocatable)
	ssn.AddOverusedFn(PluginName, p.overused)
	ssn.AddJobEnqueueableFn(PluginName, p.jobEnqueueable)
	ssn.AddEventHandler(&framework.EventHandler{
		AllocateFunc:   p.onAllocate,
		DeallocateFunc: p.onDeallocate,
	})
}

// registerMisconfigured keeps pods that ask for devices pending, with the
// argument error as the reason, instead of letting Volcano place them on
// cards nobody accounts.
func (p *plugin) registerMisconfigured(ssn *framework.Session) {
	reason := "deviceshare plugin arguments are invalid: " + p.argsErr.Error()
	ssn.AddPredicateFn(PluginName, func(task *vcapi.TaskInfo, node *vcapi.NodeInfo) error {
		if !requestsKnownDevice(task.Pod) {
			return nil
		}
		return vcapi.NewFitErrWithStatus(task, node, &vcapi.Status{
			Code: vcapi.UnschedulableAndUnresolvable, Reason: reason, Plugin: PluginName,
		})
	})
}

// newSessionState builds the session's read-mostly view: per node the
// node state's devices, node locks, and per pending task its device request.
func (st *State) newSessionState(args pluginargs.Args, backends []device.Backend, ssn *framework.Session) *sessionState {
	view, assumedPods, inflight := st.nodes.View()
	s := &sessionState{
		args:        args,
		backends:    backends,
		nodes:       make(map[string]*sessionNode, len(ssn.Nodes)),
		requests:    make(map[vcapi.TaskID]*taskRequest),
		assumedPods: assumedPods,
		allocs:      make(map[vcapi.TaskID]*sessionAlloc),
		evicted:     make(map[vcapi.TaskID]*evictedPod),
	}
	now := st.clock.Now()
	// One allocation each for the nodes, their device slices and their
	// devices: the predicate and the score read them for every node of
	// every pod, and scattered small objects cost a cache miss each.
	nb := len(backends)
	nodeSlab := make([]sessionNode, len(ssn.Nodes))
	s.slab = nodeSlab
	s.fits = fitcache.New(len(ssn.Nodes))
	ptrSlab := make([]*sessionDevices, len(ssn.Nodes)*nb)
	devSlab := make([]sessionDevices, 0, len(ssn.Nodes)*nb) // never grows: pointers into it stay valid
	s.byInfo = make(map[*vcapi.NodeInfo]int32, len(ssn.Nodes))
	k := 0
	for name, ni := range ssn.Nodes {
		sn := &nodeSlab[k]
		sn.devices = ptrSlab[k*nb : (k+1)*nb : (k+1)*nb]
		sn.idx = int32(k)
		k++
		nv := view[name]
		for i, b := range backends {
			v, ok := nv[b.Name()]
			if !ok || (v.Devices == nil && v.InvErr == nil) {
				continue
			}
			devSlab = append(devSlab, sessionDevices{base: v.Devices, invErr: v.InvErr, gen: v.Gen, stamp: s.fits.Stamp(sn.idx)})
			sn.devices[i] = &devSlab[len(devSlab)-1]
		}
		s.byInfo[ni] = sn.idx
		if args.NodeLockEnable {
			sn.lockedOutside = inflight[name] || lockedByAnnotation(ni.Node, backends, now, args.NodeLockExpiry)
		}
		s.releaseTerminating(sn, ni)
		s.nodes[name] = sn
	}
	shared := make(map[string]*taskRequest)
	volcano.EachTask(ssn, vcapi.Pending, func(_ *vcapi.JobInfo, task *vcapi.TaskInfo) {
		// nil (no device request) is kept too: requestOf is called for
		// every node a pod is predicated and scored on.
		r := s.openRequest(task, shared)
		if r == nil && args.SchedulePolicy == device.PolicyFragment {
			s.prepareBare(task)
		}
		s.requests[task.UID] = r
	})
	return s
}

// releaseTerminating takes the node's Releasing pods out of the session's
// view (see sessionDevices): they still hold their cards in the node state,
// which is what now() reports, but their cards are the node's future
// capacity, as Volcano counts their CPU and memory in FutureIdle.
func (s *sessionState) releaseTerminating(sn *sessionNode, ni *vcapi.NodeInfo) {
	volcano.EachReleasing(ni, func(pod *v1.Pod) {
		pod = s.effectivePod(pod)
		for i, b := range s.backends {
			d := sn.devices[i]
			if d == nil || d.invErr != nil || !b.HasDeviceRequest(pod) || d.read().AddQueueResource(pod) == nil {
				continue
			}
			if err := d.release(pod); err != nil {
				klog.ErrorS(err, "Taking a terminating pod's devices out of the session view failed",
					"pod", klog.KObj(pod), "node", ni.Name)
			}
		}
	})
}

func lockedByAnnotation(node *v1.Node, backends []device.Backend, now time.Time, ttl time.Duration) bool {
	for _, b := range backends {
		if l, ok := b.(device.NodeLocker); ok && l.LockName() != "" && nodelock.Held(node, l.LockName(), now, ttl) {
			return true
		}
	}
	return false
}
