package kubectlvshare

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpushare/vshare/kubectlvshare/report"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// quotaObject builds a ResourceQuota; hard is name/value pairs.
func quotaObject(ns, name string, hard ...string) *v1.ResourceQuota {
	rq := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{}}}
	for i := 0; i+1 < len(hard); i += 2 {
		rq.Spec.Hard[v1.ResourceName(hard[i])] = resource.MustParse(hard[i+1])
	}
	return rq
}

// The fixture's team pods hold 12000 + 8000 + 2 x 30000 + 20000 MiB and
// 40 + 20 + 2 x 50 + 10 cores of vGPU on gpu-a (bad's allocation does not
// decode; refused's 1000 MiB on gpu-b still counts, as the ledger counts
// it), other's MIG pod 4000 MiB.
func TestQuotaReport(t *testing.T) {
	f := newFakeEnv(t)
	scoped := quotaObject("other", "scoped", "limits.volcano.sh/vgpu-memory", "1000")
	scoped.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	for _, q := range []*v1.ResourceQuota{
		quotaObject("team", "gpu", "limits.volcano.sh/vgpu-memory", "200000", "limits.volcano.sh/vgpu-cores", "400", "requests.volcano.sh/vgpu-memory", "5", "cpu", "8"),
		quotaObject("team", "cards", "limits.volcano.sh/vgpu-number", "8"),
		scoped,
	} {
		if err := f.kube.Tracker().Add(q); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := f.run("quota", "-A", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep report.QuotaReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	notEnforced := "quota has scopes or a scope selector, which the scheduler does not evaluate; its device limits are not enforced"
	want := []report.QuotaUse{
		{Namespace: "other", Quota: "scoped", Resource: "limits.volcano.sh/vgpu-memory", Used: 4000, Hard: 1000, NotEnforced: notEnforced},
		{Namespace: "team", Quota: "cards", Resource: "limits.volcano.sh/vgpu-number", Used: 6, Hard: 8, Enforced: true},
		{Namespace: "team", Quota: "gpu", Resource: "limits.volcano.sh/vgpu-cores", Used: 170, Hard: 400, Enforced: true},
		{Namespace: "team", Quota: "gpu", Resource: "limits.volcano.sh/vgpu-memory", Used: 101000, Hard: 200000, Enforced: true},
	}
	if diff := cmp.Diff(want, rep.Quotas); diff != "" {
		t.Errorf("quotas (-want +got):\n%s", diff)
	}
	code, table, _ := f.run("quota", "-n", "team")
	if code != ExitOK || !strings.Contains(table, "limits.volcano.sh/vgpu-memory  101000/200000") || strings.Contains(table, "other") {
		t.Errorf("exit %d, table:\n%s", code, table)
	}
}

func TestWhyNamesTheQuota(t *testing.T) {
	rep := &report.WhyReport{Namespace: "team", Name: "waiter", Waiting: true, Devices: []string{"hamivgpu"},
		Recorded: parseHistogram("0/2 nodes are unavailable: 2 namespace quota exceeded: resourcequota team/gpu limits.volcano.sh/vgpu-memory: used 6000, asked 6000, hard 10000.")}
	want := "pod team/waiter waits for its namespace's quota (resourcequota team/gpu limits.volcano.sh/vgpu-memory: used 6000, asked 6000, hard 10000): see kubectl vshare quota -n team"
	if got := whySummary(rep); got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
