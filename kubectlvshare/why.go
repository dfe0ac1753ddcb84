package kubectlvshare

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vgpushare/vshare/kubectlvshare/report"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// annotationGroupName names a pod's PodGroup (set by Volcano's controllers).
const annotationGroupName = "scheduling.k8s.io/group-name"

// WhyOptions name the pod `kubectl vshare why` explains.
type WhyOptions struct {
	Namespace, Name string
	Policy          string
}

// Why explains why a pod waits: what the scheduler recorded (the pod's
// PodScheduled condition, its PodGroup's conditions, the events), whether
// its cards fit each node now and why not, and which pods would have to
// free their cards for it to fit.
func (p *Plugin) Why(ctx context.Context, o WhyOptions) (*report.WhyReport, error) {
	r := reader{c: p.clients}
	pod, err := r.pod(ctx, o.Namespace, o.Name)
	if err != nil {
		return nil, err
	}
	rep := &report.WhyReport{TypeMeta: report.TypeMeta{APIVersion: report.APIVersion, Kind: report.KindWhy}, Namespace: pod.Namespace, Name: pod.Name,
		Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName, Waiting: pod.Spec.NodeName == "", Devices: []string{},
		Recorded: []report.RecordedReason{}, Events: []report.Event{}, Policy: o.Policy, Nodes: []report.NodeFit{}, FreeUp: []report.FreeUp{}}
	var asked []*kind
	for _, k := range p.kinds {
		if k.backend.HasDeviceRequest(pod) {
			asked = append(asked, k)
			rep.Devices = append(rep.Devices, k.name())
			if err := k.backend.ValidateRequest(pod); err != nil && rep.InvalidRequest == "" {
				rep.InvalidRequest = err.Error()
			}
		}
	}
	if err := p.recorded(ctx, r, pod, rep); err != nil {
		return nil, err
	}
	if rep.Waiting && len(asked) > 0 && rep.InvalidRequest == "" {
		if err := p.now(ctx, r, pod, asked, rep); err != nil {
			return nil, err
		}
	}
	rep.Summary = whySummary(rep)
	return rep, nil
}

// recorded fills in what the scheduler and the controllers wrote: the
// pod's PodScheduled condition, its PodGroup, both objects' events and the
// fit error's reasons.
func (p *Plugin) recorded(ctx context.Context, r reader, pod *v1.Pod, rep *report.WhyReport) error {
	if c := podCondition(pod, v1.PodScheduled); c != nil {
		rep.Scheduled = &report.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			Time: rfc3339(c.LastTransitionTime.Time)}
	}
	events, err := r.events(ctx, pod.Namespace, "Pod", pod.Name)
	if err != nil {
		return err
	}
	var pgMessage string
	if name := pod.Annotations[annotationGroupName]; name != "" {
		pg, err := r.podGroup(ctx, pod.Namespace, name)
		if err != nil {
			return err
		}
		rep.PodGroup = podGroupState(pg)
		for _, c := range pg.Status.Conditions {
			if c.Type == schedulingv1beta1.PodGroupUnschedulableType && c.Status == v1.ConditionTrue {
				pgMessage = c.Message
			}
		}
		pgEvents, err := r.events(ctx, pod.Namespace, "PodGroup", name)
		if err != nil {
			return err
		}
		events = mergeEvents(events, pgEvents)
	}
	for _, e := range events {
		rep.Events = append(rep.Events, report.Event{Time: rfc3339(eventTime(e)), Type: e.Type, Reason: e.Reason,
			Object: strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name, Message: e.Message, Count: e.Count})
	}
	// The latest fit error: the pod's condition, else the PodGroup's, else
	// the latest event carrying one.
	candidates := []string{}
	if rep.Waiting && rep.Scheduled != nil && rep.Scheduled.Status == string(v1.ConditionFalse) {
		candidates = append(candidates, rep.Scheduled.Message)
	}
	candidates = append(candidates, pgMessage)
	for i := len(rep.Events) - 1; i >= 0; i-- {
		candidates = append(candidates, rep.Events[i].Message)
	}
	for _, m := range candidates {
		if h := parseHistogram(m); len(h) > 0 {
			rep.Recorded = h
			break
		}
	}
	return nil
}

// now asks every node's cards whether the pod fits them now, and where it
// does not but pods leaving would help, which pods.
func (p *Plugin) now(ctx context.Context, r reader, pod *v1.Pod, asked []*kind, rep *report.WhyReport) error {
	nodes, err := r.nodes(ctx, "", "")
	if err != nil {
		return err
	}
	pods, err := r.pods(ctx, "")
	if err != nil {
		return err
	}
	byNode := podsByNode(pods)
	for i := range nodes {
		ns := accountNode(asked, &nodes[i], byNode[nodes[i].Name])
		for _, k := range asked {
			nf := nodeFit(ns, k, pod, rep.Policy)
			rep.Nodes = append(rep.Nodes, nf)
			if nf.Fits || !nf.Resolvable {
				continue
			}
			for _, ds := range ns.devices {
				if ds.kind == k {
					if f, ok := freeUp(ds, pod, rep.Policy); ok {
						f.Node = nodes[i].Name
						rep.FreeUp = append(rep.FreeUp, f)
					}
				}
			}
		}
	}
	return nil
}

// whySummary is the report in one sentence.
func whySummary(rep *report.WhyReport) string {
	who := "pod " + rep.Namespace + "/" + rep.Name
	switch {
	case !rep.Waiting:
		return who + " does not wait: it is bound to node " + rep.Node + " (phase " + rep.Phase + ")"
	case len(rep.Devices) == 0:
		return who + " waits but asks for no shared device; see the scheduler's reasons"
	case rep.InvalidRequest != "":
		return who + " waits because its device request is invalid: " + rep.InvalidRequest
	}
	if q := quotaWait(rep); q != "" {
		return q
	}
	var fits []string
	for _, n := range rep.Nodes {
		if n.Fits {
			fits = append(fits, n.Name)
		}
	}
	if len(fits) > 0 {
		return who + " waits, although its cards fit " + strings.Join(fits, ", ") +
			" now: it waits for its gang (PodGroup minMember), for other resources, or for the next scheduling session"
	}
	s := who + " waits: its cards fit no node now"
	if len(rep.FreeUp) == 0 {
		return s + ", and no pod leaving would change that"
	}
	best := rep.FreeUp[0]
	for _, f := range rep.FreeUp[1:] {
		if len(f.Pods) < len(best.Pods) {
			best = f
		}
	}
	names := make([]string, len(best.Pods))
	for i, p := range best.Pods {
		names[i] = p.Namespace + "/" + p.Name
	}
	return s + "; it would fit " + best.Node + " if " + strings.Join(names, ", ") + " left"
}

// histogramItem starts one "N reason" item of a fit error histogram.
var histogramItem = regexp.MustCompile(`(?:^|, )(\d+) `)

// parseHistogram reads the reasons of a Volcano fit error, "... 0/3 nodes
// are unavailable: 2 reason a, 1 reason b.", or nil when msg has none.
func parseHistogram(msg string) []report.RecordedReason {
	const marker = "nodes are unavailable: "
	i := strings.LastIndex(msg, marker)
	if i < 0 {
		return nil
	}
	s := strings.TrimSuffix(strings.TrimSpace(msg[i+len(marker):]), ".")
	locs := histogramItem.FindAllStringSubmatchIndex(s, -1)
	var out []report.RecordedReason
	for j, l := range locs {
		n, err := strconv.Atoi(s[l[2]:l[3]])
		if err != nil {
			continue
		}
		end := len(s)
		if j+1 < len(locs) {
			end = locs[j+1][0]
		}
		out = append(out, report.RecordedReason{Nodes: n, Reason: s[l[1]:end]})
	}
	return out
}

// podGroupState reports a PodGroup.
func podGroupState(pg *schedulingv1beta1.PodGroup) *report.PodGroupState {
	s := &report.PodGroupState{Name: pg.Name, Phase: string(pg.Status.Phase), MinMember: pg.Spec.MinMember, Running: pg.Status.Running,
		Conditions: []report.Condition{}}
	for _, c := range pg.Status.Conditions {
		s.Conditions = append(s.Conditions, report.Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, Time: rfc3339(c.LastTransitionTime.Time)})
	}
	return s
}

// mergeEvents merges two lists sorted by time.
func mergeEvents(a, b []v1.Event) []v1.Event {
	out := make([]v1.Event, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if eventTime(b[0]).Before(eventTime(a[0])) {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

// eventTime is when an event last happened.
func eventTime(e v1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// rfc3339 renders t, or "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
