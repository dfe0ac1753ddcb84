package kubectlvshare

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// nodeState is one node's devices as the scheduler's ledger sees them:
// each device type's inventory decoded by its backend and the node's pods
// accounted on it.
type nodeState struct {
	node    *v1.Node
	devices []*deviceState
}

// deviceState is one device type on one node.
type deviceState struct {
	kind *kind
	// devices has every accounted pod; nil when the registration is
	// invalid (err).
	devices device.Devices
	err     error
	// empty is the node's cards with no pod accounted.
	empty device.Devices
	// cards and layouts describe the cards by position, with every
	// accounted pod.
	cards   []device.CardUsage
	layouts []string
	// holdings are what each accounted pod holds, in accounting order.
	holdings []podHolding
	// problems are the pods whose allocation could not be accounted.
	problems []podProblem
	// warnings are the node's settings that were partly ignored.
	warnings []error
}

// podHolding is what one pod holds of one device type on a node.
type podHolding struct {
	pod   *v1.Pod
	cards []cardShare
}

// cardShare is one card a pod holds: its position in CardUsage and the
// memory and cores the pod takes of it.
type cardShare struct {
	pos           int
	memMiB, cores int64
}

// podProblem is a pod whose allocation annotation cannot be accounted.
type podProblem struct {
	pod *v1.Pod
	err error
}

// accountNode decodes the node's registrations and accounts the pods bound
// to it, as the deviceshare ledger does: pods in creation order (then by
// namespace and name) so that a conflict is reported on the later pod,
// terminated pods skipped by the backends themselves. Device types without
// cards on the node are left out.
func accountNode(kinds []*kind, node *v1.Node, pods []*v1.Pod) *nodeState {
	ns := &nodeState{node: node}
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b *v1.Pod) int {
		if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, k := range kinds {
		d, err := k.backend.NewDevices(node)
		switch {
		case err != nil:
			ns.devices = append(ns.devices, &deviceState{kind: k, err: err})
			continue
		case d == nil:
			continue
		}
		ds := &deviceState{kind: k, devices: d, empty: d.DeepCopy()}
		if w, ok := d.(device.InventoryWarner); ok {
			ds.warnings = w.InventoryWarnings()
		}
		for _, pod := range sorted {
			if pod.Spec.NodeName != node.Name || !k.backend.HasDeviceRequest(pod) {
				continue
			}
			if err := d.AddResource(pod); err != nil {
				ds.problems = append(ds.problems, podProblem{pod: pod, err: err})
				continue
			}
			if shares := ds.sharesOf(pod); len(shares) > 0 {
				ds.holdings = append(ds.holdings, podHolding{pod: pod, cards: shares})
			}
		}
		ds.cards = usage(d)
		ds.layouts = layouts(d, len(ds.cards))
		ns.devices = append(ns.devices, ds)
	}
	return ns
}

// sharesOf returns what the pod holds: the difference it makes to the
// node's empty cards when it is accounted alone.
func (ds *deviceState) sharesOf(pod *v1.Pod) []cardShare {
	alone := ds.empty.DeepCopy()
	if err := alone.AddResource(pod); err != nil {
		return nil
	}
	before, after := usage(ds.empty), usage(alone)
	var out []cardShare
	for i := range after {
		b, a := before[i], after[i]
		if a.Pods != b.Pods || a.MemoryUsedMiB != b.MemoryUsedMiB || a.CoresUsed != b.CoresUsed {
			out = append(out, cardShare{pos: i, memMiB: a.MemoryUsedMiB - b.MemoryUsedMiB, cores: a.CoresUsed - b.CoresUsed})
		}
	}
	return out
}

// holders returns the pods holding the card at position pos, with their
// shares of it.
func (ds *deviceState) holders(pos int) []podShare {
	var out []podShare
	for _, h := range ds.holdings {
		for _, c := range h.cards {
			if c.pos == pos {
				out = append(out, podShare{pod: h.pod, share: c})
			}
		}
	}
	return out
}

// podShare is a pod and its share of one card.
type podShare struct {
	pod   *v1.Pod
	share cardShare
}

// usage returns the Devices' per-card usage; every backend reports it.
func usage(d device.Devices) []device.CardUsage {
	r, ok := d.(device.CardReporter)
	if !ok {
		return nil
	}
	cards, _ := r.CardUsage()
	return cards
}

// layouts returns the Devices' card layouts, or n empty strings.
func layouts(d device.Devices, n int) []string {
	if r, ok := d.(device.CardDescriber); ok {
		if l := r.CardLayouts(); len(l) == n {
			return l
		}
	}
	return make([]string, n)
}

// podsByNode groups pods by the node they are bound to.
func podsByNode(pods []v1.Pod) map[string][]*v1.Pod {
	out := map[string][]*v1.Pod{}
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" {
			out[n] = append(out[n], &pods[i])
		}
	}
	return out
}
