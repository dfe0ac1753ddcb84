package report

import (
	"fmt"
	"io"
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
