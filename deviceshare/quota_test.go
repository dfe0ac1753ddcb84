package deviceshare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/metrics"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// staticQuotas is a quotawatch.Source serving fixed ResourceQuotas.
type staticQuotas struct {
	quotas []*v1.ResourceQuota
	synced bool
}

func (s staticQuotas) ResourceQuotas() ([]*v1.ResourceQuota, bool) { return s.quotas, s.synced }

// resourceQuota builds a ResourceQuota; hard is name/value pairs.
func resourceQuota(ns, name string, hard ...string) *v1.ResourceQuota {
	rq := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{}}}
	for i := 0; i+1 < len(hard); i += 2 {
		rq.Spec.Hard[v1.ResourceName(hard[i])] = resource.MustParse(hard[i+1])
	}
	return rq
}

// quotaCluster is a vGPU cluster of two nodes with two 16000 MiB cards each
// whose ResourceQuotas are quotas.
func quotaCluster(t *testing.T, quotas ...*v1.ResourceQuota) *cluster {
	t.Helper()
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{
		vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000}),
		vgpuNode("n2", vcard{"GPU-2", "", 16000}, vcard{"GPU-3", "", 16000}),
	}, nil)
	c.st.quotas.Src = staticQuotas{quotas: quotas, synced: true}
	return c
}

// inNamespace moves a test pod to ns.
func inNamespace(ns string, p *v1.Pod) *v1.Pod {
	p.Namespace = ns
	p.UID = types.UID("uid-" + ns + "-" + p.Name)
	return p
}

func nsPodGroup(ns, name string, minMember int32) *schedulingv1beta1.PodGroup {
	return util.BuildPodGroup(name, ns, "default", minMember, nil, schedulingv1beta1.PodGroupInqueue)
}

// percentPod asks for n cards of pct percent of their memory each.
func percentPod(name, group string, n, pct int64) *v1.Pod {
	return devicePod(name, group, v1.ResourceList{
		"volcano.sh/vgpu-number":            *resource.NewQuantity(n, resource.DecimalSI),
		"volcano.sh/vgpu-memory-percentage": *resource.NewQuantity(pct, resource.DecimalSI),
	})
}

// heldMiB sums, per namespace, the memory the bound pods hold according
// to their allocation annotations (memory per card times cards).
func heldMiB(t *testing.T, binds map[string]boundPod) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for key, b := range binds {
		ns, _, _ := strings.Cut(key, "/")
		for _, ctr := range strings.Split(b.Annotations[vgpuproto.AnnotationIDs], ";") {
			for _, card := range strings.Split(ctr, ":") {
				f := strings.Split(card, ",")
				if len(f) < 4 {
					continue
				}
				q, err := resource.ParseQuantity(f[2])
				if err != nil {
					t.Fatalf("%s: card %q: %v", key, card, err)
				}
				out[ns] += q.Value()
			}
		}
	}
	return out
}

func TestQuotaMemoryTimesCardsWithinOneSession(t *testing.T) {
	c := quotaCluster(t, resourceQuota(testNamespace, "gpu", "limits.volcano.sh/vgpu-memory", "10000"))
	a := vgpuPod("a", "pa", 2, 3000, 0)
	b := vgpuPod("b", "pb", 2, 3000, 0)
	c.addJob(podGroup("pa", 1), a)
	c.addJob(podGroup("pb", 1), b)
	msgs := sessionFitMessages(c, a, b)
	binds := c.waitBinds(1)
	c.expectNoBind()
	if got := heldMiB(t, binds)[testNamespace]; got != 6000 {
		t.Errorf("namespace holds %d MiB, want 6000 (one pod of 2 x 3000): %v", got, binds)
	}
	want := "namespace quota exceeded: resourcequota team-a/gpu limits.volcano.sh/vgpu-memory: used 6000, asked 6000, hard 10000"
	if !strings.Contains(msgs, want) {
		t.Errorf("fit errors %q, want one containing %q", msgs, want)
	}
}

func TestQuotaCountsBoundPodsAfterRestart(t *testing.T) {
	quota := resourceQuota(testNamespace, "gpu", "limits.volcano.sh/vgpu-memory", "10000", "limits.volcano.sh/vgpu-cores", "100")
	c := quotaCluster(t, quota)
	a := vgpuPod("a", "pa", 2, 3000, 30)
	c.addJob(podGroup("pa", 1), a)
	c.session(nil)
	c.waitBinds(1)
	running := c.confirmBinds(a)

	// A new scheduler process: a new State knows nothing but the pods.
	c2 := quotaCluster(t, quota)
	c2.addJob(podGroup("pa", 1), running...)
	b := vgpuPod("b", "pb", 2, 1000, 30)
	small := vgpuPod("small", "ps", 1, 3000, 10)
	c2.addJob(podGroup("pb", 1), b)
	msg := sessionFitMessages(c2, b)
	want := "limits.volcano.sh/vgpu-cores: used 60, asked 60, hard 100"
	if !strings.Contains(msg, want) {
		t.Errorf("fit error %q, want one containing %q", msg, want)
	}
	c2.expectNoBind()
	c2.addJob(podGroup("ps", 1), small)
	c2.session(nil)
	if binds := c2.waitBinds(1); binds[testNamespace+"/small"].Node == "" {
		t.Errorf("pod small (3000 MiB, 10 cores; 9000 and 70 in all) not bound: %v", binds)
	}
}

func TestQuotaPercentageCountsTheCardsMemory(t *testing.T) {
	c := quotaCluster(t, resourceQuota(testNamespace, "gpu", "limits.volcano.sh/vgpu-memory", "20000"))
	a := percentPod("a", "pa", 1, 50)
	b := percentPod("b", "pb", 2, 50)
	c.addJob(podGroup("pa", 1), a)
	c.addJob(podGroup("pb", 1), b)
	msgs := sessionFitMessages(c, a, b)
	binds := c.waitBinds(1)
	c.expectNoBind()
	if got := heldMiB(t, binds)[testNamespace]; got != 8000 && got != 16000 {
		t.Fatalf("namespace holds %d MiB, want 8000 or 16000 (half of one or two 16000 MiB cards): %v", got, binds)
	}
	if !strings.Contains(msgs, "asked 16000, hard 20000") && !strings.Contains(msgs, "asked 8000, hard 20000") {
		t.Errorf("fit errors %q: want the refused pod's memory resolved on the cards (8000 or 16000 MiB)", msgs)
	}
}

func TestQuotaGangAllOrNothing(t *testing.T) {
	c := quotaCluster(t, resourceQuota(testNamespace, "gpu", "limits.volcano.sh/vgpu-memory", "10000"))
	var gang []*v1.Pod
	for _, n := range []string{"g0", "g1", "g2"} {
		gang = append(gang, vgpuPod(n, "gang", 1, 4000, 0))
	}
	c.addJob(podGroup("gang", 3), gang...)
	msgs := sessionFitMessages(c, gang...)
	c.expectNoBind()
	if !strings.Contains(msgs, "used 8000, asked 4000, hard 10000") {
		t.Errorf("fit errors %q, want the third member refused with the first two counted", msgs)
	}
	// The discarded gang gave its charges back: a pod of 10000 MiB fits.
	solo := vgpuPod("solo", "solo", 1, 10000, 0)
	c.addJob(podGroup("solo", 1), solo)
	c.session(nil)
	if binds := c.waitBinds(1); binds[testNamespace+"/solo"].Node == "" {
		t.Errorf("pod solo not bound after the gang was discarded: %v", binds)
	}
}

func TestQuotaNamespacesAreIndependent(t *testing.T) {
	c := quotaCluster(t,
		resourceQuota("team-a", "gpu", "limits.volcano.sh/vgpu-memory", "4000"),
		resourceQuota("team-b", "gpu", "limits.volcano.sh/vgpu-memory", "8000"),
		// Names the scheduler leaves to the API server or does not know.
		resourceQuota("team-c", "plain", "requests.volcano.sh/vgpu-memory", "1", "limits.volcano.sh/vgpu-memory-percentage", "1", "cpu", "1"))
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		for _, n := range []string{"p0", "p1"} {
			c.addJob(nsPodGroup(ns, n, 1), inNamespace(ns, vgpuPod(n, n, 1, 4000, 0)))
		}
	}
	c.session(nil)
	binds := c.waitBinds(5)
	c.expectNoBind()
	if diff := cmp.Diff(map[string]int64{"team-a": 4000, "team-b": 8000, "team-c": 8000}, heldMiB(t, binds)); diff != "" {
		t.Errorf("MiB held per namespace (-want +got):\n%s", diff)
	}
}

func TestQuotaUnknownKeepsDevicePodsWaiting(t *testing.T) {
	c := quotaCluster(t)
	c.st.quotas.Src = staticQuotas{synced: false}
	a := vgpuPod("a", "pa", 1, 1000, 0)
	c.addJob(podGroup("pa", 1), a)
	msg := sessionFitMessages(c, a)
	c.expectNoBind()
	if !strings.Contains(msg, ReasonQuotasUnknown) {
		t.Errorf("fit error %q, want %q", msg, ReasonQuotasUnknown)
	}
}

func TestQuotaHardZeroAllowsNothing(t *testing.T) {
	c := quotaCluster(t, resourceQuota(testNamespace, "none", "limits.volcano.sh/vgpu-number", "0"))
	a := vgpuPod("a", "pa", 1, 1000, 0)
	c.addJob(podGroup("pa", 1), a)
	msg := sessionFitMessages(c, a)
	c.expectNoBind()
	if want := "limits.volcano.sh/vgpu-number: used 0, asked 1, hard 0"; !strings.Contains(msg, want) {
		t.Errorf("fit error %q, want one containing %q", msg, want)
	}
}

func TestQuotaMetrics(t *testing.T) {
	c := quotaCluster(t, resourceQuota(testNamespace, "gpu", "limits.volcano.sh/vgpu-memory", "10000", "limits.volcano.sh/vgpu-number", "4"))
	a := vgpuPod("a", "pa", 2, 3000, 0)
	c.addJob(podGroup("pa", 1), a)
	c.session(nil)
	c.waitBinds(1)
	reg := prometheus.NewPedanticRegistry()
	metrics.New(reg).CollectQuotas(c.st.quotas)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[f.GetName()+"{"+l["namespace"]+","+l["quota"]+","+l["resource"]+"}"] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"volcano_deviceshare_quota_used{team-a,gpu,limits.volcano.sh/vgpu-memory}": 6000,
		"volcano_deviceshare_quota_hard{team-a,gpu,limits.volcano.sh/vgpu-memory}": 10000,
		"volcano_deviceshare_quota_used{team-a,gpu,limits.volcano.sh/vgpu-number}": 2,
		"volcano_deviceshare_quota_hard{team-a,gpu,limits.volcano.sh/vgpu-number}": 4,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestQuotaLimitsNames(t *testing.T) {
	resources := []v1.ResourceName{"volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores"}
	scoped := resourceQuota("ns", "scoped", "limits.volcano.sh/vgpu-memory", "1")
	scoped.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	tests := []struct {
		name    string
		rq      *v1.ResourceQuota
		want    []string
		wantErr error
	}{
		{name: "limits names", rq: resourceQuota("ns", "q", "limits.volcano.sh/vgpu-memory", "8Ki", "limits.volcano.sh/vgpu-cores", "150"),
			want: []string{"limits.volcano.sh/vgpu-cores=150", "limits.volcano.sh/vgpu-memory=8192"}},
		{name: "API server names and others ignored", rq: resourceQuota("ns", "q", "requests.volcano.sh/vgpu-memory", "1",
			"volcano.sh/vgpu-memory", "1", "limits.volcano.sh/vgpu-memory-percentage", "1", "limits.nvidia.com/gpumem", "1", "limits.cpu", "1")},
		{name: "scoped", rq: scoped, want: []string{"limits.volcano.sh/vgpu-memory=1"}, wantErr: device.ErrScopedQuota},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			limits, err := device.QuotaLimits(tc.rq, resources)
			if err != tc.wantErr {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			var got []string
			for _, l := range limits {
				got = append(got, l.Name()+"="+resource.NewQuantity(l.Hard, resource.DecimalSI).String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
		})
	}
}
