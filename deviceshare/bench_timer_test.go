package deviceshare

import (
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	builtinvgpu "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

// callbackTimer measures the time a device plugin's own code takes in a
// session: every function the plugin registered (predicate, pre-predicate,
// node order, batch node order, allocatable, overused, its event handlers)
// and its OnSessionOpen and OnSessionClose. For Volcano's built-in vGPU it
// also times the card work Volcano runs for it outside its plugin: the
// device's Allocate and Release (called by the predicates plugin's event
// handler, with the pod patch) and AddResource and SubResource (called by
// NodeInfo when a task is added or removed). The time is wall time summed
// over goroutines; Volcano predicates nodes on 16 goroutines over the
// machine's cores, so a callback descheduled mid-call counts its wait too
// (both implementations alike).
type callbackTimer struct {
	ns    atomic.Int64
	calls atomic.Int64
}

func (ct *callbackTimer) since(start time.Time) {
	ct.ns.Add(int64(time.Since(start)))
	ct.calls.Add(1)
}

// timedPlugin wraps the plugin under test. devices says whether the
// built-in vGPU devices in each session's NodeInfos are timed too.
type timedPlugin struct {
	framework.Plugin
	t       *callbackTimer
	devices bool
}

func (p timedPlugin) OnSessionOpen(ssn *framework.Session) {
	handlers := len(sessionField[[]*framework.EventHandler](ssn, "eventHandlers"))
	start := time.Now()
	p.Plugin.OnSessionOpen(ssn)
	p.t.since(start)
	p.wrap(ssn, handlers)
	if p.devices {
		for _, ni := range ssn.Nodes {
			if d, ok := ni.Others[builtinvgpu.DeviceName].(vcapi.Devices); ok {
				ni.Others[builtinvgpu.DeviceName] = &timedDevices{Devices: d, t: p.t}
			}
		}
	}
}

func (p timedPlugin) OnSessionClose(ssn *framework.Session) {
	start := time.Now()
	p.Plugin.OnSessionClose(ssn)
	p.t.since(start)
}

// wrap replaces the functions the plugin registered in the session with
// timed ones; handlers is the number of event handlers registered before
// the plugin's OnSessionOpen ran.
func (p timedPlugin) wrap(ssn *framework.Session, handlers int) {
	name, t := p.Name(), p.t
	if m := sessionField[map[string]vcapi.PredicateFn](ssn, "predicateFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(task *vcapi.TaskInfo, node *vcapi.NodeInfo) error {
			defer t.since(time.Now())
			return fn(task, node)
		}
	}
	if m := sessionField[map[string]vcapi.PrePredicateFn](ssn, "prePredicateFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(task *vcapi.TaskInfo) error {
			defer t.since(time.Now())
			return fn(task)
		}
	}
	if m := sessionField[map[string]vcapi.NodeOrderFn](ssn, "nodeOrderFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(task *vcapi.TaskInfo, node *vcapi.NodeInfo) (float64, error) {
			defer t.since(time.Now())
			return fn(task, node)
		}
	}
	if m := sessionField[map[string]vcapi.BatchNodeOrderFn](ssn, "batchNodeOrderFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(task *vcapi.TaskInfo, nodes []*vcapi.NodeInfo) (map[string]float64, error) {
			defer t.since(time.Now())
			return fn(task, nodes)
		}
	}
	if m := sessionField[map[string]vcapi.AllocatableFn](ssn, "allocatableFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(q *vcapi.QueueInfo, task *vcapi.TaskInfo) bool {
			defer t.since(time.Now())
			return fn(q, task)
		}
	}
	if m := sessionField[map[string]vcapi.ValidateFn](ssn, "overusedFns"); m[name] != nil {
		fn := m[name]
		m[name] = func(obj interface{}) bool {
			defer t.since(time.Now())
			return fn(obj)
		}
	}
	for _, eh := range sessionField[[]*framework.EventHandler](ssn, "eventHandlers")[handlers:] {
		if fn := eh.AllocateFunc; fn != nil {
			eh.AllocateFunc = func(e *framework.Event) {
				defer t.since(time.Now())
				fn(e)
			}
		}
		if fn := eh.DeallocateFunc; fn != nil {
			eh.DeallocateFunc = func(e *framework.Event) {
				defer t.since(time.Now())
				fn(e)
			}
		}
	}
}

// sessionField reads an unexported field of Volcano's Session: the maps
// and the slice the Add*Fn methods fill, which the session exposes no other
// way. Maps are references, so the caller may change their entries.
func sessionField[T any](ssn *framework.Session, name string) T {
	f := reflect.ValueOf(ssn).Elem().FieldByName(name)
	if !f.IsValid() {
		panic("framework.Session has no field " + name)
	}
	return *(*T)(unsafe.Pointer(f.UnsafeAddr()))
}

// timedDevices times the built-in vGPU's card work that Volcano runs
// outside the deviceshare plugin's callbacks. FilterNode and ScoreNode are
// called only from those callbacks, which are timed already. It is a
// pointer: the built-in checks its devices with reflect's IsNil.
type timedDevices struct {
	vcapi.Devices
	t *callbackTimer
}

func (d *timedDevices) AddResource(pod *v1.Pod) {
	defer d.t.since(time.Now())
	d.Devices.AddResource(pod)
}

func (d *timedDevices) SubResource(pod *v1.Pod) {
	defer d.t.since(time.Now())
	d.Devices.SubResource(pod)
}

func (d *timedDevices) Allocate(c kubernetes.Interface, pod *v1.Pod) error {
	defer d.t.since(time.Now())
	return d.Devices.Allocate(c, pod)
}

func (d *timedDevices) Release(c kubernetes.Interface, pod *v1.Pod) error {
	defer d.t.since(time.Now())
	return d.Devices.Release(c, pod)
}
