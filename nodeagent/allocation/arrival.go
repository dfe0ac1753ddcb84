package allocation

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Where a request learnt which pods were pending when it came (the source
// Arrivals.Arrive returns, for an agent's metrics).
const (
	// PendingFromInformer: the agent's informer showed pending pods.
	PendingFromInformer = "informer"
	// PendingFromJournal: it showed none yet, and the journal vouched.
	PendingFromJournal = "journal"
	// PendingFromAPIServer: the node's pods were listed (LivePods).
	PendingFromAPIServer = "api-server"
	// PendingUnknown: no LivePods, or the list failed; any pending pod
	// may serve the request.
	PendingUnknown = "unknown"
)

// Arrivals says, when a kubelet request comes, which pods it may be
// served: those pending with the agent at that moment. The kubelet asks
// only for a pod already bound to the node, so that pod is among them. A
// pod bound later has its own request coming; serving it to this request
// (one for a pod deleted meanwhile, say) would give this admission its
// devices, and that pod's own request the next pod's, and so on down the
// node's queue (found by the e2e fault campaign on the vGPU agent).
type Arrivals struct {
	// Node names the node in logs.
	Node string
	// Protocol says which pods are pending (Protocol.Pending).
	Protocol Protocol
	// Informer returns the agent's candidates from its informer. Required.
	Informer func() ([]*v1.Pod, error)
	// Journal, when set, follows the informer's events to say what was
	// pending when a request came, when the informer shows nothing pending
	// yet (it may lag the kubelet), without asking the API server.
	Journal *Journal
	// LivePods, when set, lists the node's pods from the API server; it is
	// asked when neither the informer nor the journal can tell.
	LivePods func(ctx context.Context) ([]*v1.Pod, error)
	// Count, when set, is told, for every request, where Arrive learnt
	// which pods were pending (Pending* constants), for an agent's metrics.
	Count func(source string)
}

// Arrival is what one request may be served.
type Arrival struct {
	// set is the pods pending when the request came; nil when it cannot
	// be known (any pending pod may serve the request) or with a journal.
	set map[types.UID]bool
	// journal and mark, when journal is set, say it instead of set.
	journal *Journal
	mark    Mark
}

// Arrive returns what a request that has just come may be served, and
// tells Count where that was learnt. The informer is read first.
// When it has no pending pod, the journal marks the informer's position
// if it can vouch for it, and the pods that reach the informer afterwards
// are allowed up to its cut (see Journal); else the API server is asked
// (LivePods). When that cannot be known either (no LivePods, or the list
// failed), any pending pod may serve the request.
func (a Arrivals) Arrive(ctx context.Context) Arrival {
	r, source := a.arrive(ctx)
	if a.Count != nil {
		a.Count(source)
	}
	return r
}

func (a Arrivals) arrive(ctx context.Context) (Arrival, string) {
	var out map[types.UID]bool
	if pods, err := a.Informer(); err == nil {
		out = a.pendingUIDs(pods)
	}
	if len(out) > 0 {
		return Arrival{set: out}, PendingFromInformer
	}
	if a.Journal != nil {
		if m, ok := a.Journal.Mark(); ok {
			return Arrival{journal: a.Journal, mark: m}, PendingFromJournal
		}
	}
	if a.LivePods == nil {
		return Arrival{}, PendingUnknown
	}
	pods, err := a.LivePods(ctx)
	if err != nil {
		klog.ErrorS(err, "Cannot list the node's pods; any pending pod may serve the request", "node", a.Node)
		return Arrival{}, PendingUnknown
	}
	return Arrival{set: a.pendingUIDs(pods)}, PendingFromAPIServer
}

// pendingUIDs returns the UIDs of the pods that are pending (Protocol).
func (a Arrivals) pendingUIDs(pods []*v1.Pod) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, p := range pods {
		if a.Protocol.Pending(p) {
			out[p.UID] = true
		}
	}
	return out
}

// Allowed returns the pods the request may be served now (nil: any) and
// whether no pod can join them, so that a request none of them matches
// need not wait.
func (r Arrival) Allowed() (map[types.UID]bool, bool) {
	if r.journal == nil {
		return r.set, r.set != nil && len(r.set) == 0
	}
	return r.journal.Allowed(r.mark)
}
