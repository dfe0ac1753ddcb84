package device

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Namespace quotas on shares.
//
// A ResourceQuota hard limit named QuotaPrefix + a device resource
// ("limits.volcano.sh/vgpu-memory") limits the sum, over the namespace's
// pods that hold cards, of what they hold: for vGPU, cards, memory times
// cards and cores times cards, as Devices.AddQueueResource reports them from
// the allocation annotations. The deviceshare plugin enforces it when it
// places a pod; kubectl vshare reports it. Both read the names with
// QuotaLimits, so they agree on which limits count.
//
// The API server's own quota admission counts extended resources only under
// "requests." names, per container and at pod creation, and ignores
// "limits." names for them: the two never evaluate the same limit.

// QuotaPrefix starts the names of the ResourceQuota hard limits the plugin
// enforces on device resources.
const QuotaPrefix = "limits."

// ReasonQuotaExceeded starts the reason of a pod its namespace's quota keeps
// pending.
const ReasonQuotaExceeded = "namespace quota exceeded: "

// ErrScopedQuota is returned by QuotaLimits for a ResourceQuota with scopes
// or a scope selector: which pods such a quota covers is the API server's
// business, and the plugin does not guess it.
var ErrScopedQuota = errors.New("quota has scopes or a scope selector, which the scheduler does not evaluate; its device limits are not enforced")

// QuotaNamer is implemented by backends whose resources a namespace quota
// may limit (vGPU's count, memory, memory percentage and cores, under their
// configured names).
type QuotaNamer interface {
	Resources() (count, memory, percentage, cores v1.ResourceName)
}

// QuotaResources returns the device resources a quota may limit with these
// backends: each QuotaNamer's count, memory and cores. A memory percentage
// is not a quota resource: it counts as the memory it resolves to.
func QuotaResources(backends []Backend) []v1.ResourceName {
	var out []v1.ResourceName
	for _, b := range backends {
		if n, ok := b.(QuotaNamer); ok {
			count, memory, _, cores := n.Resources()
			out = append(out, count, memory, cores)
		}
	}
	return out
}

// QuotaLimit is one hard limit of a ResourceQuota on a device resource.
type QuotaLimit struct {
	Namespace, Quota string
	// Resource is the device resource limited ("volcano.sh/vgpu-memory");
	// the quota names it with QuotaPrefix.
	Resource v1.ResourceName
	// Hard is the limit, in the unit pods ask for the resource in.
	Hard int64
}

// Name is the limit's name in the ResourceQuota.
func (l QuotaLimit) Name() string { return QuotaPrefix + string(l.Resource) }

// QuotaLimits returns rq's limits on the given device resources, by
// resource name. Other names (cpu, requests.*, another resource) are not
// the plugin's and are left out. A quota with scopes or a scope selector
// returns its limits and ErrScopedQuota: callers report them, but do not
// enforce them.
func QuotaLimits(rq *v1.ResourceQuota, resources []v1.ResourceName) ([]QuotaLimit, error) {
	var out []QuotaLimit
	for name, q := range rq.Spec.Hard {
		res, ok := strings.CutPrefix(string(name), QuotaPrefix)
		if !ok || !containsResource(resources, v1.ResourceName(res)) {
			continue
		}
		out = append(out, QuotaLimit{Namespace: rq.Namespace, Quota: rq.Name, Resource: v1.ResourceName(res), Hard: q.Value()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	if len(out) > 0 && (len(rq.Spec.Scopes) > 0 || rq.Spec.ScopeSelector != nil) {
		return out, ErrScopedQuota
	}
	return out, nil
}

func containsResource(list []v1.ResourceName, name v1.ResourceName) bool {
	for _, r := range list {
		if r == name {
			return true
		}
	}
	return false
}

// Exceeded returns the reason a pod asking for asked more of the resource
// waits, its namespace using used of it: ReasonQuotaExceeded, then the
// quota, the limit's name and the amounts.
func (l QuotaLimit) Exceeded(used, asked int64) string {
	return fmt.Sprintf("%sresourcequota %s/%s %s: used %d, asked %d, hard %d",
		ReasonQuotaExceeded, l.Namespace, l.Quota, l.Name(), used, asked, l.Hard)
}

// Fits reports whether a pod asking for asked fits the limit with used
// already held. Kubernetes' semantics: a hard limit of 0 allows nothing.
func (l QuotaLimit) Fits(used, asked int64) bool { return asked <= 0 || used+asked <= l.Hard }
