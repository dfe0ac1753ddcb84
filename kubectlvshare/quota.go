package kubectlvshare

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/kubectlvshare/report"
)

// QuotaOptions select the namespaces of `kubectl vshare quota`.
type QuotaOptions struct {
	// Namespace is the namespace; "" means every namespace.
	Namespace string
}

// Quota reports the namespace quotas on device resources.
func (p *Plugin) Quota(ctx context.Context, o QuotaOptions) (*report.QuotaReport, error) {
	r := reader{c: p.clients}
	list, err := p.clients.Kube.CoreV1().ResourceQuotas(o.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &apiError{verb: "list", resource: "resourcequotas", namespace: o.Namespace, err: err}
	}
	rep := &report.QuotaReport{TypeMeta: report.TypeMeta{APIVersion: report.APIVersion, Kind: report.KindQuota}, Quotas: []report.QuotaUse{}}
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
		rep.Quotas = append(rep.Quotas, report.QuotaUse{Namespace: l.Namespace, Quota: l.Quota, Resource: l.Name(),
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

// quotaWait returns, when the scheduler's recorded reasons name a
// namespace quota, the sentence `why` sums the pod up with: which quota,
// and where to see its use; "" otherwise.
func quotaWait(rep *report.WhyReport) string {
	for _, r := range rep.Recorded {
		if strings.HasPrefix(r.Reason, device.ReasonQuotaExceeded) {
			return "pod " + rep.Namespace + "/" + rep.Name + " waits for its namespace's quota (" +
				strings.TrimPrefix(r.Reason, device.ReasonQuotaExceeded) + "): see kubectl vshare quota -n " + rep.Namespace
		}
	}
	return ""
}
