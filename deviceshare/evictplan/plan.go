// Package evictplan answers, for the deviceshare plugin's preemption and
// reclaim, "would the pod fit the node's cards without these pods", and
// searches the fewest victims that make it fit, on copies of the node's
// Devices for the device types the pod asks for. It only reads the Devices
// it is given.
package evictplan

import (
	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// Planner answers "would the pod fit the node's cards without these pods"
// for the device types the pod asks for.
type Planner struct {
	pod    *v1.Pod
	policy string
	views  []device.Devices
}

// New returns a planner for the pod under the policy over views, the
// node's Devices of each device type the pod asks for (never modified).
func New(pod *v1.Pod, policy string, views []device.Devices) *Planner {
	return &Planner{pod: pod, policy: policy, views: views}
}

// Holds reports whether the pod holds devices of the planner's types here.
func (pl *Planner) Holds(pod *v1.Pod) bool {
	for _, d := range pl.views {
		if d.HasDeviceRequest(pod) && len(d.AddQueueResource(pod)) > 0 {
			return true
		}
	}
	return false
}

// Fits reports whether the pod fits once the given pods are gone.
func (pl *Planner) Fits(without []*v1.Pod) bool {
	for _, d := range pl.views {
		if len(without) > 0 {
			d = d.DeepCopy()
			for _, w := range without {
				if err := d.SubResource(w); err != nil {
					return false
				}
			}
		}
		if !d.FilterNode(pl.pod, pl.policy).IsSuccess() {
			return false
		}
	}
	return true
}

// maxPairSearch bounds the candidates the two-victim search looks at.
const maxPairSearch = 24

// Search returns the victims among holders (in eviction preference order)
// whose release lets the pod fit: the shortest prefix that fits, pruned of
// every victim it does not need (a sharer of a card the pod cannot use is
// never needed), then replaced by a single victim or a pair of no higher
// priority when fewer suffice. Like kube-scheduler, it never evicts a
// higher-priority pod to spare several lower-priority ones. nil when even
// all of them are not enough. same tells holders of equal priority apart.
func (pl *Planner) Search(holders []*vcapi.TaskInfo, effective func(*v1.Pod) *v1.Pod,
	same func(a, b *vcapi.TaskInfo) bool) []*vcapi.TaskInfo {
	pods := make([]*v1.Pod, len(holders))
	for i, h := range holders {
		pods[i] = effective(h.Pod)
	}
	prefix := -1
	for k := 1; k <= len(pods); k++ {
		if pl.Fits(pods[:k]) {
			prefix = k
			break
		}
	}
	if prefix < 0 {
		return nil
	}
	chosen := make([]int, prefix)
	for i := range chosen {
		chosen[i] = i
	}
	for i := len(chosen) - 1; i >= 0 && len(chosen) > 1; i-- {
		rest := append(append([]int(nil), chosen[:i]...), chosen[i+1:]...)
		if pl.Fits(pick(pods, rest)) {
			chosen = rest
		}
	}
	if len(chosen) > 1 {
		// Alternatives may use holders up to the chosen set's highest
		// priority (holders are sorted, so that is a prefix).
		top := chosen[len(chosen)-1]
		limit := top + 1
		for limit < len(holders) && same(holders[limit], holders[top]) {
			limit++
		}
		if better := pl.fewer(pods[:limit], len(chosen)); better != nil {
			chosen = better
		}
	}
	out := make([]*vcapi.TaskInfo, len(chosen))
	for i, k := range chosen {
		out[i] = holders[k]
	}
	return out
}

// fewer looks for one victim, then (when n > 2) two victims, that suffice,
// in preference order.
func (pl *Planner) fewer(pods []*v1.Pod, n int) []int {
	for i := range pods {
		if pl.Fits(pods[i : i+1]) {
			return []int{i}
		}
	}
	if n <= 2 {
		return nil
	}
	m := min(len(pods), maxPairSearch)
	for i := 0; i < m; i++ {
		for j := i + 1; j < m; j++ {
			if pl.Fits([]*v1.Pod{pods[i], pods[j]}) {
				return []int{i, j}
			}
		}
	}
	return nil
}

func pick(pods []*v1.Pod, idx []int) []*v1.Pod {
	out := make([]*v1.Pod, len(idx))
	for i, k := range idx {
		out[i] = pods[k]
	}
	return out
}
