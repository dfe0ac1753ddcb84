// Package nodestate is the deviceshare plugin's state of every node's
// devices, kept across sessions (the Store): each node's decoded
// inventories and the allocations of its pods, updated incrementally at
// each session's open, and the allocations in flight, accounted from the
// binder's decisions (deviceshare/bind). Sessions read it through View and
// copy a node's devices on their first write.
package nodestate

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/bind"
)

// Store is the long-lived device state of every node, kept across
// sessions. For each node and backend it holds the decoded inventory and the
// allocations of the pods on the node, updated incrementally: an inventory is
// decoded again only when its InventoryKey changes and a pod is accounted
// again only when its allocation annotations change.
//
// It also accounts assumed decisions (bind.Decisions, the binder's one
// record of each allocation): allocations this scheduler made whose pods
// have not come back from the informer with their annotations yet (the bind
// is in flight). Volcano's cache already shows such a pod on its node, in
// Binding state, but without annotations; the store accounts it from the
// decision so the next session cannot hand out the same capacity, and
// settles the decision when the pod shows its annotations (confirmed) or is
// no longer on the node (bind failed, pod deleted).
//
// Locking: mu guards every field (the decisions have their own lock, taken
// after mu). Sync runs at session open, Stats from metrics collection.
// Devices handed to a session are only read by it (sessions copy on write);
// the next Sync runs after that session has closed.
type Store struct {
	mu        sync.Mutex
	clock     clock.PassiveClock
	nodes     map[string]*nodeDevices
	decisions *bind.Decisions
	// gens numbers decoded inventories (typeDevices.gen).
	gens uint64
}

type nodeDevices struct {
	// devices by backend name.
	devices map[string]*typeDevices
	seen    bool
}

type typeDevices struct {
	backend device.Backend
	invKey  string
	// devices is nil when the node has none of this type or its inventory is
	// invalid (invErr set).
	devices device.Devices
	invErr  error
	// gen identifies the decoded inventory, unique within the store: it
	// changes whenever the node's inventory does (a card's health, size,
	// cordon), so a bind can tell its allocation was made on an older one.
	gen  uint64
	pods map[types.UID]*accountedPod
	seen bool
}

type accountedPod struct {
	// pod is the object given to AddResource, kept to subtract the same.
	pod *v1.Pod
	// source is the task's pod the accounted object was derived from; when
	// it is the same pointer nothing changed.
	source *v1.Pod
	// err is set when AddResource refused the pod (logged once).
	err  error
	seen bool
}

// New returns an empty store accounting the assumed ones of decisions.
func New(clk clock.PassiveClock, decisions *bind.Decisions) *Store {
	return &Store{
		clock:     clk,
		nodes:     make(map[string]*nodeDevices),
		decisions: decisions,
	}
}

// SyncResult is what one Sync saw, for logs, metrics and events.
type SyncResult struct {
	Nodes, Decoded, Added, Removed, Rejected, Assumed, Confirmed, Dropped int
	// Problems are the invalid inventories and allocations this Sync found
	// for the first time (each is reported once, until it changes).
	Problems []Problem
}

// Problem is an invalid node inventory (Pod nil) or a pod allocation that
// cannot be accounted.
type Problem struct {
	Node   string
	Device string
	Pod    *v1.Pod
	Err    error
	// Usable says the node's devices stay in service without the part Err
	// names (device.InventoryWarner: link scores that cannot be read, a card
	// cordon naming no card); otherwise a node problem makes them
	// unavailable.
	Usable bool
}

// Sync brings the store up to date with a session's snapshot for the given
// backends and returns, per node and backend name, the accounted devices the
// session may read (nil entries mean the node has none of that type) and the
// inventory errors.
func (l *Store) Sync(nodes map[string]*vcapi.NodeInfo, backends []device.Backend) SyncResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	var res SyncResult
	assumed := l.decisions.AssumedNow()
	assumedSeen := make(map[types.UID]bool, len(assumed))
	for name, ni := range nodes {
		if ni == nil || ni.Node == nil {
			continue
		}
		res.Nodes++
		nl := l.nodes[name]
		if nl == nil {
			nl = &nodeDevices{devices: make(map[string]*typeDevices, len(backends))}
			l.nodes[name] = nl
		}
		nl.seen = true
		for _, b := range backends {
			dl := nl.devices[b.Name()]
			if dl == nil || dl.backend != b {
				dl = &typeDevices{backend: b, invKey: "\x00unset"}
				nl.devices[b.Name()] = dl
			}
			dl.seen = true
			l.syncInventory(name, ni.Node, dl, &res)
			if dl.devices != nil {
				l.syncPods(name, ni, dl, assumed, assumedSeen, &res)
			}
		}
		for bname, dl := range nl.devices {
			if !dl.seen {
				delete(nl.devices, bname)
			}
			dl.seen = false
		}
	}
	for name, nl := range l.nodes {
		if !nl.seen {
			delete(l.nodes, name)
		}
		nl.seen = false
	}
	res.Dropped, res.Assumed = l.decisions.SettleUnseen(assumedSeen)
	return res
}

func (l *Store) syncInventory(name string, node *v1.Node, dl *typeDevices, res *SyncResult) {
	key := dl.backend.InventoryKey(node)
	if key == dl.invKey {
		return
	}
	res.Decoded++
	dl.invKey = key
	l.gens++
	dl.gen = l.gens
	dl.pods = make(map[types.UID]*accountedPod)
	devs, err := dl.backend.NewDevices(node)
	dl.devices, dl.invErr = devs, err
	if err != nil {
		dl.devices = nil
		res.Problems = append(res.Problems, Problem{Node: name, Device: dl.backend.Name(), Err: err})
		klog.ErrorS(err, "Node's device inventory is invalid; its devices are unavailable until it is fixed",
			"node", name, "device", dl.backend.Name())
	} else if w, ok := devs.(device.InventoryWarner); ok {
		for _, werr := range w.InventoryWarnings() {
			res.Problems = append(res.Problems, Problem{Node: name, Device: dl.backend.Name(), Err: werr, Usable: true})
		}
	}
}

// syncPods accounts the pods on the node: new and changed allocations are
// added, vanished ones subtracted.
func (l *Store) syncPods(name string, ni *vcapi.NodeInfo, dl *typeDevices, assumed map[types.UID]*bind.Decision,
	assumedSeen map[types.UID]bool, res *SyncResult) {
	for _, task := range ni.Tasks {
		if !holdsDevices(task.Status) || task.Pod == nil {
			continue
		}
		uid := task.Pod.UID
		pod := task.Pod
		if d := assumed[uid]; d != nil && d.Node == name {
			if carries(pod, d.Annotations) {
				res.Confirmed++
				l.decisions.Settle(uid)
				delete(assumed, uid)
			} else {
				assumedSeen[uid] = true
				pod = d.Effective(pod)
			}
		}
		if !dl.backend.HasDeviceRequest(pod) {
			continue
		}
		ap := dl.pods[uid]
		if ap != nil && (ap.source == task.Pod || ap.pod == pod || sameAllocation(ap.pod, pod)) {
			ap.source, ap.seen = task.Pod, true
			continue
		}
		if ap != nil {
			l.unaccount(name, dl, uid, ap, res)
		}
		ap = &accountedPod{pod: pod, source: task.Pod, seen: true}
		if err := dl.devices.AddResource(pod); err != nil {
			ap.err = err
			res.Rejected++
			res.Problems = append(res.Problems, Problem{Node: name, Device: dl.backend.Name(), Pod: pod, Err: err})
			klog.ErrorS(err, "Pod's device allocation cannot be accounted; its cards are treated as free",
				"pod", klog.KObj(pod), "node", name, "device", dl.backend.Name())
		} else {
			res.Added++
		}
		dl.pods[uid] = ap
	}
	for uid, ap := range dl.pods {
		if !ap.seen {
			l.unaccount(name, dl, uid, ap, res)
			continue
		}
		ap.seen = false
	}
}

func (l *Store) unaccount(name string, dl *typeDevices, uid types.UID, ap *accountedPod, res *SyncResult) {
	delete(dl.pods, uid)
	if ap.err != nil {
		return
	}
	res.Removed++
	if err := dl.devices.SubResource(ap.pod); err != nil {
		klog.ErrorS(err, "Releasing a pod's device allocation failed", "pod", klog.KObj(ap.pod), "node", name,
			"device", dl.backend.Name())
	}
}

// DeviceView is what a session may read of one node's devices of one type.
type DeviceView struct {
	Devices device.Devices
	InvErr  error
	Gen     uint64
}

// View returns the store's devices per node and backend name, and the
// annotated pods of still-assumed allocations by UID. Call after Sync,
// under no lock of the caller's.
func (l *Store) View() (map[string]map[string]DeviceView, map[types.UID]*v1.Pod, map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]map[string]DeviceView, len(l.nodes))
	for name, nl := range l.nodes {
		m := make(map[string]DeviceView, len(nl.devices))
		for bname, dl := range nl.devices {
			m[bname] = DeviceView{Devices: dl.devices, InvErr: dl.invErr, Gen: dl.gen}
		}
		out[name] = m
	}
	effective := make(map[types.UID]*v1.Pod)
	inflight := make(map[string]bool)
	l.decisions.EachAssumed(func(uid types.UID, d *bind.Decision) {
		if e := d.Cached(); e != nil {
			effective[uid] = e
		}
		inflight[d.Node] = true
	})
	return out, effective, inflight
}

// InventoryGen returns the generation of the node's inventory of backend
// (typeDevices.gen); false when the store has none.
func (l *Store) InventoryGen(node, backend string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nl := l.nodes[node]
	if nl == nil {
		return 0, false
	}
	dl := nl.devices[backend]
	if dl == nil {
		return 0, false
	}
	return dl.gen, true
}

// Stats are counts for metrics.
type Stats struct {
	Nodes, Assumed, InvalidInventories, RejectedPods int
}

// Stats returns the store's current counts.
func (l *Store) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Nodes: len(l.nodes), Assumed: l.decisions.CountAssumed()}
	for _, nl := range l.nodes {
		for _, dl := range nl.devices {
			if dl.invErr != nil {
				s.InvalidInventories++
			}
			for _, ap := range dl.pods {
				if ap.err != nil {
					s.RejectedPods++
				}
			}
		}
	}
	return s
}

// holdsDevices reports whether a task in this status holds its devices on
// its node. Pipelined tasks are session-only reservations; terminated pods
// have given their devices back. Releasing pods (deleted or evicted, still
// running) hold their cards until they exit, so the store counts them: a
// pod bound onto their cards would share a card with them. Sessions treat
// those cards as future capacity, as Volcano's FutureIdle does, so a
// preemptor is pipelined onto its victims' cards rather than evicting more
// (see sessionDevices).
func holdsDevices(s vcapi.TaskStatus) bool {
	switch s {
	case vcapi.Allocated, vcapi.Binding, vcapi.Bound, vcapi.Running, vcapi.Releasing, vcapi.Unknown:
		return true
	default:
		return false
	}
}

// carries reports whether the pod shows every key of the annotations, which
// means the API server has applied the binding's annotations. Values may
// have moved on since (a node agent updates the bind phase).
func carries(pod *v1.Pod, annotations map[string]string) bool {
	if len(annotations) == 0 {
		return true
	}
	for k := range annotations {
		if _, ok := pod.Annotations[k]; !ok {
			return false
		}
	}
	return true
}

// sameAllocation reports whether two versions of a pod would be accounted
// the same: same annotations, same labels (deviceshare.GPUExclusiveRules
// match pods by label) and the same terminated-or-not phase.
func sameAllocation(a, b *v1.Pod) bool {
	return maps.Equal(a.Annotations, b.Annotations) && maps.Equal(a.Labels, b.Labels) && terminated(a) == terminated(b)
}

func terminated(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// QuotaUsage sums, per namespace with limits, what the accounted pods hold
// by resource name (Devices.AddQueueResource), into add.
func (l *Store) QuotaUsage(limits map[string][]device.QuotaLimit, add func(ns string, held map[string]float64)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, nl := range l.nodes {
		for _, dl := range nl.devices {
			if dl.devices == nil {
				continue
			}
			for _, ap := range dl.pods {
				if ap.err != nil || limits[ap.pod.Namespace] == nil {
					continue
				}
				add(ap.pod.Namespace, dl.devices.AddQueueResource(ap.pod))
			}
		}
	}
}

// EachDevices calls fn, under the store's lock, for every node's devices
// of every type (backend name); fn must only read them.
func (l *Store) EachDevices(fn func(node, backend string, d device.Devices)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for node, nl := range l.nodes {
		for name, dl := range nl.devices {
			if dl.devices != nil {
				fn(node, name, dl.devices)
			}
		}
	}
}
