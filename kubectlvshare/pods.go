package kubectlvshare

import (
	"cmp"
	"context"
	"slices"

	"github.com/vgpushare/vshare/kubectlvshare/report"
	v1 "k8s.io/api/core/v1"
)

// Bind phases and admission values.
const (
	bindPhaseAllocating = "allocating"
	bindPhaseSuccess    = "success"
	bindPhaseFailed     = "failed"

	admittedYes     = "yes"
	admittedNo      = "no"
	admittedPending = "pending"
)

// PodsOptions select the pods of `kubectl vshare pods`.
type PodsOptions struct {
	// Namespace is the namespace; "" means every namespace.
	Namespace string
}

// Pods reports every pod of the namespace that asks for a device type.
func (p *Plugin) Pods(ctx context.Context, o PodsOptions) (*report.PodReport, error) {
	r := reader{c: p.clients}
	pods, err := r.pods(ctx, o.Namespace)
	if err != nil {
		return nil, err
	}
	nodes, err := r.nodes(ctx, "", "")
	if err != nil {
		return nil, err
	}
	rep := podReport(p.kinds, nodes, pods)
	// The node agent's refusal is an event on the pod.
	for i := range rep.Pods {
		pc := &rep.Pods[i]
		if pc.Admitted != admittedNo {
			continue
		}
		events, err := r.events(ctx, pc.Namespace, "Pod", pc.Name)
		if err != nil {
			return nil, err
		}
		pc.AdmissionMessage = refusal(events)
	}
	return rep, nil
}

// podReport accounts the pods on their nodes and reports every pod asking
// for a device type, by namespace and name.
func podReport(kinds []*kind, nodes []v1.Node, pods []v1.Pod) *report.PodReport {
	rep := &report.PodReport{TypeMeta: report.TypeMeta{APIVersion: report.APIVersion, Kind: report.KindPods}, Pods: []report.PodCards{}}
	byNode := podsByNode(pods)
	states := map[string]*nodeState{}
	for i := range nodes {
		if ps := byNode[nodes[i].Name]; len(ps) > 0 {
			states[nodes[i].Name] = accountNode(kinds, &nodes[i], ps)
		}
	}
	for i := range pods {
		pod := &pods[i]
		var asked []*kind
		for _, k := range kinds {
			if k.backend.HasDeviceRequest(pod) {
				asked = append(asked, k)
			}
		}
		if len(asked) == 0 {
			continue
		}
		rep.Pods = append(rep.Pods, podCards(pod, asked, states[pod.Spec.NodeName]))
	}
	slices.SortFunc(rep.Pods, func(a, b report.PodCards) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return rep
}

// podCards reports one pod; ns is its node's state (nil when not bound or
// the node is gone).
func podCards(pod *v1.Pod, asked []*kind, ns *nodeState) report.PodCards {
	pc := report.PodCards{Namespace: pod.Namespace, Name: pod.Name, Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName,
		Devices: []string{}, Cards: []report.HeldCard{}}
	for _, k := range asked {
		pc.Devices = append(pc.Devices, k.name())
		for _, key := range k.bindPhases {
			if v, ok := pod.Annotations[key]; ok && pc.BindPhase == "" {
				pc.BindPhase = v
			}
		}
	}
	if pod.Spec.NodeName == "" {
		if c := podCondition(pod, v1.PodScheduled); c != nil && c.Status == v1.ConditionFalse {
			pc.Waiting = c.Message
		}
		return pc
	}
	pc.Admitted = admission(pod, pc.BindPhase)
	if ns == nil {
		return pc
	}
	for _, ds := range ns.devices {
		for _, pp := range ds.problems {
			if pp.pod == pod {
				pc.Errors = append(pc.Errors, report.Problem{Node: ns.node.Name, Device: ds.kind.name(), Pod: podKey(pod), Message: pp.err.Error()})
			}
		}
		for _, h := range ds.holdings {
			if h.pod != pod {
				continue
			}
			for _, c := range h.cards {
				u := ds.cards[c.pos]
				pc.Cards = append(pc.Cards, report.HeldCard{Device: ds.kind.name(), Index: u.Index, ID: u.ID, Model: u.Type,
					MemoryMiB: c.memMiB, Cores: c.cores})
			}
		}
	}
	return pc
}

// admission says whether the node agent served a bound pod, from its bind
// phase (device types without one: whether the pod runs).
func admission(pod *v1.Pod, bindPhase string) string {
	switch bindPhase {
	case bindPhaseSuccess:
		return admittedYes
	case bindPhaseFailed:
		return admittedNo
	case bindPhaseAllocating:
		return admittedPending
	}
	if pod.Status.Phase == v1.PodRunning || pod.Status.Phase == v1.PodSucceeded {
		return admittedYes
	}
	return admittedPending
}

// refusal returns the latest warning that is not the scheduler's: the node
// agent's reason for refusing the pod's devices.
func refusal(events []v1.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Type == v1.EventTypeWarning && e.Reason != "FailedScheduling" {
			return e.Reason + ": " + e.Message
		}
	}
	return ""
}

// podCondition returns the pod's condition of type t, or nil.
func podCondition(pod *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
