// Package queuecap is the deviceshare plugin's accounting of queue
// capability and deserved amounts on device resources, which Volcano v1.10
// cannot see (its api.NewResource drops the vGPU memory and core names):
// what the queues' allocated tasks hold and their enqueued jobs are
// expected to take, and whether a request would pass a capability.
package queuecap

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// ReasonQueueCapability starts the reason of a task its queue's capability
// keeps pending.
const ReasonQueueCapability = "queue capability exceeded: "

// Accounts are a session's device accounting of the queues that set a
// capability or a deserved amount on a device resource. A nil *Accounts
// accounts nothing.
type Accounts struct {
	// Capability and Deserved by queue, only device resources.
	Capability, Deserved map[vcapi.QueueID]map[string]float64
	// Used is what allocated tasks hold, Inqueue what enqueued jobs that
	// have not started yet are expected to take (as proportion does).
	Used, Inqueue map[vcapi.QueueID]map[string]float64
}

// New returns empty accounts.
func New() *Accounts {
	return &Accounts{Capability: map[vcapi.QueueID]map[string]float64{}, Deserved: map[vcapi.QueueID]map[string]float64{},
		Used: map[vcapi.QueueID]map[string]float64{}, Inqueue: map[vcapi.QueueID]map[string]float64{}}
}

// Add adds (sign 1) or subtracts (sign -1) an allocation's holdings.
func (q *Accounts) Add(queue vcapi.QueueID, held map[string]float64, sign float64) {
	if !q.Tracked(queue) {
		return
	}
	AddTo(q.Used, queue, held, sign)
}

// Tracked reports whether the queue sets a capability or a deserved amount
// on a device resource.
func (q *Accounts) Tracked(queue vcapi.QueueID) bool {
	return q != nil && (q.Capability[queue] != nil || q.Deserved[queue] != nil)
}

// OverDeserved reports whether the queue holds more than its deserved
// amount of one of the resources (only those it sets a deserved amount
// on); false for a queue without any.
func (q *Accounts) OverDeserved(queue vcapi.QueueID, resources map[string]float64) bool {
	if q == nil {
		return false
	}
	for name, d := range q.Deserved[queue] {
		if resources[name] > 0 && q.Used[queue][name] > d {
			return true
		}
	}
	return false
}

// WithinDeserved reports whether the queue sets a deserved amount on device
// resources and holds less than it on one of them.
func (q *Accounts) WithinDeserved(queue vcapi.QueueID) bool {
	if q == nil {
		return false
	}
	for name, d := range q.Deserved[queue] {
		if q.Used[queue][name] < d {
			return true
		}
	}
	return false
}

// AddTo adds (sign 1) or subtracts (sign -1) amounts to the queue's in m.
func AddTo(m map[vcapi.QueueID]map[string]float64, queue vcapi.QueueID, amounts map[string]float64, sign float64) {
	if len(amounts) == 0 {
		return
	}
	u := m[queue]
	if u == nil {
		u = make(map[string]float64, len(amounts))
		m[queue] = u
	}
	for k, v := range amounts {
		u[k] += sign * v
	}
}

// Exceeded returns the first device resource (in name order) on which
// base plus extra would pass the queue's capability, with a message.
func (q *Accounts) Exceeded(queue *vcapi.QueueInfo, request map[string]float64, withInqueue bool) (string, bool) {
	if q == nil {
		return "", false
	}
	caps := q.Capability[queue.UID]
	names := make([]string, 0, len(caps))
	for name := range caps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := request[name]
		if want <= 0 {
			continue
		}
		held := q.Used[queue.UID][name]
		if withInqueue {
			held += q.Inqueue[queue.UID][name]
		}
		if held+want > caps[name] {
			return fmt.Sprintf("%squeue %s would hold %g of %s (%g held, %g requested), above its capability %g",
				ReasonQueueCapability, queue.Name, held+want, name, held, want, caps[name]), true
		}
	}
	return "", false
}

// IsDeviceResource reports whether a queue capability names a
// resource whose use the plugin accounts: anything but the resources
// Volcano itself accounts exactly from pod specs.
func IsDeviceResource(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage:
		return false
	}
	return !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}
