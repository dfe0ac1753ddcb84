package kubectlvshare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/device"
)

// KindQuota is the kind of `kubectl vshare quota`'s report.
const KindQuota = "QuotaReport"

// QuotaReport is `kubectl vshare quota`: every ResourceQuota limit on a
// device resource (limits.volcano.sh/vgpu-memory and its family) and what
// the namespace's pods hold of it, counted as the scheduler counts it:
// memory and cores times cards, from the allocation annotations.
type QuotaReport struct {
	TypeMeta `json:",inline"`
	Quotas   []QuotaUse `json:"quotas"`
}

// QuotaUse is one limit of one ResourceQuota.
type QuotaUse struct {
	Namespace string `json:"namespace"`
	Quota     string `json:"quota"`
	// Resource is the limit's name in the ResourceQuota.
	Resource string `json:"resource"`
	Used     int64  `json:"used"`
	Hard     int64  `json:"hard"`
	// Enforced is false for a quota with scopes, which the scheduler does
	// not evaluate; NotEnforced says why.
	Enforced    bool   `json:"enforced"`
	NotEnforced string `json:"notEnforced,omitempty"`
}

// QuotaOptions select the namespaces of `kubectl vshare quota`.
type QuotaOptions struct {
	// Namespace is the namespace; "" means every namespace.
	Namespace string
}

// Quota reports the namespace quotas on device resources.
func (p *Plugin) Quota(ctx context.Context, o QuotaOptions) (*QuotaReport, error) {
	r := reader{c: p.clients}
	list, err := p.clients.Kube.CoreV1().ResourceQuotas(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &apiError{verb: "list", resource: "resourcequotas", namespace: o.Namespace, err: err}
	}
	rep := &QuotaReport{TypeMeta: TypeMeta{APIVersion: APIVersion, Kind: KindQuota}, Quotas: []QuotaUse{}}
	limits := p.quotaLimits(list.Items)
	if len(limits) == 0 {
		return rep, nil
	}
	nodes, err := r.nodes(ctx, "", "")
	if err != nil {
		return nil, err
	}
	pods, err := r.pods(ctx, o.Namespace)
	if err != nil {
		return nil, err
	}
	used := p.quotaUsed(nodes, pods)
	for _, l := range limits {
		rep.Quotas = append(rep.Quotas, QuotaUse{Namespace: l.Namespace, Quota: l.Quota, Resource: l.Name(),
			Used: used[l.Namespace][string(l.Resource)], Hard: l.Hard, Enforced: l.err == nil, NotEnforced: errString(l.err)})
	}
	return rep, nil
}

// quotaLimit is a limit and, for one the scheduler does not enforce, why.
type quotaLimit struct {
	device.QuotaLimit
	err error
}

// quotaLimits reads the quotas' limits on device resources as the
// scheduler does (device.QuotaLimits), sorted by namespace, quota, resource.
func (p *Plugin) quotaLimits(quotas []v1.ResourceQuota) []quotaLimit {
	backends := make([]device.Backend, len(p.kinds))
	for i, k := range p.kinds {
		backends[i] = k.backend
	}
	resources := device.QuotaResources(backends)
	var out []quotaLimit
	for i := range quotas {
		ls, err := device.QuotaLimits(&quotas[i], resources)
		if err != nil && !errors.Is(err, device.ErrScopedQuota) {
			continue
		}
		for _, l := range ls {
			out = append(out, quotaLimit{QuotaLimit: l, err: err})
		}
	}
	slices.SortFunc(out, func(a, b quotaLimit) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Quota, b.Quota), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}

// quotaUsed sums, by namespace and resource, what the pods hold on their
// nodes' devices (Devices.AddQueueResource, as the scheduler's ledger).
func (p *Plugin) quotaUsed(nodes []v1.Node, pods []v1.Pod) map[string]map[string]int64 {
	used := map[string]map[string]int64{}
	byNode := podsByNode(pods)
	for i := range nodes {
		ns := accountNode(p.kinds, &nodes[i], byNode[nodes[i].Name])
		for _, ds := range ns.devices {
			if ds.devices == nil {
				continue
			}
			for _, h := range ds.holdings {
				for k, v := range ds.devices.AddQueueResource(h.pod) {
					if used[h.pod.Namespace] == nil {
						used[h.pod.Namespace] = map[string]int64{}
					}
					used[h.pod.Namespace][k] += int64(math.Round(v))
				}
			}
		}
	}
	return used
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// table renders one row per limit.
func (r *QuotaReport) table(w io.Writer, _ bool) error {
	if len(r.Quotas) == 0 {
		_, err := fmt.Fprintln(w, "No ResourceQuota limits a device resource (limits.volcano.sh/vgpu-memory and its family).")
		return err
	}
	tw := newTable(w)
	var n notes
	row(tw, "NAMESPACE", "QUOTA", "RESOURCE", "USED/HARD", "ENFORCED")
	for _, q := range r.Quotas {
		enforced := "yes"
		if !q.Enforced {
			enforced = "no " + n.ref(q.NotEnforced)
		} else if q.Used > q.Hard {
			enforced = "yes (over: hard lowered after pods were placed)"
		}
		row(tw, q.Namespace, q.Quota, q.Resource, ratio(q.Used, q.Hard), enforced)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return n.write(w)
}

// quotaWait returns, when the scheduler's recorded reasons name a
// namespace quota, the sentence `why` sums the pod up with: which quota,
// and where to see its use; "" otherwise.
func quotaWait(rep *WhyReport) string {
	for _, r := range rep.Recorded {
		if strings.HasPrefix(r.Reason, device.ReasonQuotaExceeded) {
			return "pod " + rep.Namespace + "/" + rep.Name + " waits for its namespace's quota (" +
				strings.TrimPrefix(r.Reason, device.ReasonQuotaExceeded) + "): see kubectl vshare quota -n " + rep.Namespace
		}
	}
	return ""
}
