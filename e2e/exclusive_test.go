//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/deviceshare"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/kubectlvshare"
	"github.com/vgpushare/vshare/kubectlvshare/report"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// exclusiveLabel is the pod label of the only exclusive rule the test's
// scheduler runs with; no other test uses it.
const exclusiveLabel = "vshare-e2e-exclusive"

// TestExclusiveRules: with deviceshare.GPUExclusiveRules naming a label,
// pods carrying it never share a card with each other, even under binpack,
// which would stack them on one card; pods without it share as usual,
// also with a rule-matching pod; once every card of the node holds a
// rule-matching pod, the next one waits with a reason naming the rule.
func TestExclusiveRules(t *testing.T) {
	const ns = "exclusive-rules"
	ctx := setup(t, ns, 8*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf(
		"deviceshare.VGPUEnable: true", "deviceshare.SchedulePolicy: binpack", "deviceshare.ScheduleWeight: 10",
		pluginargs.ArgGPUExclusiveRules+": [{"+exclusiveLabel+`: "yes"}]`)})
	node := gpuNodes[0]
	pinned := map[string]string{"kubernetes.io/hostname": node}
	matching := framework.VGPUTask{Name: "m", Replicas: 4, VGPUs: 1, MemoryMiB: 2000, Cores: 10,
		Labels: map[string]string{exclusiveLabel: "yes"}, NodeSelector: pinned}
	cards := registeredCards(ctx, t, node)

	first := framework.VGPUJob(ns, "excl-a", matching)
	mustRun(ctx, t, first)
	second := framework.VGPUJob(ns, "excl-b", matching)
	mustRun(ctx, t, second)
	holders := cardHolders(ctx, t, ns, first.Name, second.Name)
	if len(holders) != 2*int(matching.Replicas) || len(holders) != len(cards) {
		t.Errorf("8 rule-matching pods on %d cards of %d: %v; want one card each", len(holders), len(cards), holders)
	}

	plain := matching
	plain.Name, plain.Replicas, plain.Labels = "p", 3, map[string]string{exclusiveLabel: "no"}
	shared := framework.VGPUJob(ns, "plain", plain)
	mustRun(ctx, t, shared)
	plainCards := cardHolders(ctx, t, ns, shared.Name)
	if len(plainCards) != 1 {
		t.Errorf("binpack put the 3 pods without the rule's label on %d cards %v, want one", len(plainCards), plainCards)
	}
	for card := range plainCards {
		if _, ok := holders[card]; !ok {
			t.Errorf("card %s of the plain pods holds no rule-matching pod; every card does", card)
		}
	}
	checkNoOvercommit(ctx, t)

	late := framework.VGPUJob(ns, "excl-late", framework.VGPUTask{Name: "m", Replicas: 1, VGPUs: 1, MemoryMiB: 2000, Cores: 10,
		Labels: map[string]string{exclusiveLabel: "yes"}, NodeSelector: pinned})
	if err := cluster.CreateJob(ctx, late); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, late.Name) })
	waitUnschedulable(ctx, t, ns, late.Name, vgpu.ReasonExclusiveRule)
}

// TestCardCordon: an operator cordons the card a running pod holds with
// the node annotation volcano.sh/vgpu-cordon. The pod keeps running on it,
// a new pod that binpack would put next to it goes to another card, a pod
// that needs every card of the node waits with a reason naming the cordon,
// `kubectl vshare cards` shows the cordoned card, a cordon naming no card
// is reported on the node, and uncordoning lets the waiting pod run.
func TestCardCordon(t *testing.T) {
	const ns = "card-cordon"
	ctx := setup(t, ns, 8*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf(
		"deviceshare.VGPUEnable: true", "deviceshare.SchedulePolicy: binpack", "deviceshare.ScheduleWeight: 10")})
	node := gpuNodes[1]
	pinned := map[string]string{"kubernetes.io/hostname": node}
	cards := registeredCards(ctx, t, node)

	holder := framework.VGPUJob(ns, "holder", framework.VGPUTask{Name: "h", Replicas: 1, VGPUs: 1, MemoryMiB: 4000, Cores: 10, NodeSelector: pinned})
	mustRun(ctx, t, holder)
	var held string
	for card := range cardHolders(ctx, t, ns, holder.Name) {
		held = strings.TrimPrefix(card, node+"/")
	}
	setCordon(ctx, t, node, held)
	t.Cleanup(func() { setCordon(context.Background(), t, node, "") })

	next := framework.VGPUJob(ns, "next", framework.VGPUTask{Name: "n", Replicas: 1, VGPUs: 1, MemoryMiB: 4000, Cores: 10, NodeSelector: pinned})
	// The ledger takes the cordon at the next session; mustRun's job is
	// created after the annotation is on the node.
	mustRun(ctx, t, next)
	for card := range cardHolders(ctx, t, ns, next.Name) {
		if card == node+"/"+held {
			t.Errorf("the new pod went to the cordoned card %s", card)
		}
	}
	pods, err := cluster.JobPods(ctx, ns, holder.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Status.Phase != v1.PodRunning || !strings.HasPrefix(p.Annotations[vgpuproto.AnnotationIDs], held+",") {
			t.Errorf("holder %s is %s with %s=%q after the cordon, want Running on %s", p.Name, p.Status.Phase,
				vgpuproto.AnnotationIDs, p.Annotations[vgpuproto.AnnotationIDs], held)
		}
	}
	checkNoOvercommit(ctx, t)

	all := framework.VGPUJob(ns, "all-cards", framework.VGPUTask{Name: "a", Replicas: 1, VGPUs: int64(len(cards)), MemoryMiB: 1000,
		Cores: 10, NodeSelector: pinned})
	if err := cluster.CreateJob(ctx, all); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, all.Name) })
	waitUnschedulable(ctx, t, ns, all.Name, vgpu.ReasonCordoned)

	rep := vshareJSON[report.CardReport](t, ctx, cluster.Kubeconfig, kubectlvshare.ExitOK, "cards", "--node", node)
	for _, nc := range rep.Nodes {
		for _, c := range nc.Cards {
			if c.Cordoned != (c.ID == held) {
				t.Errorf("kubectl vshare cards: card %s cordoned=%v, want %v", c.ID, c.Cordoned, c.ID == held)
			}
		}
	}
	table := vshare(t, ctx, cluster.Kubeconfig, "cards", "--node", node, "-o", "wide").stdout
	t.Logf("kubectl vshare cards --node %s -o wide:\n%s", node, table)
	if !cordonedRow(table, held) {
		t.Errorf("kubectl vshare cards -o wide shows no row with card %s and CORDON \"card\"", held)
	}

	bad := held + ",GPU-not-on-this-node"
	setCordon(ctx, t, node, bad)
	waitNodeEvent(ctx, t, node, deviceshare.EventInvalidDeviceSetting, vgpuproto.AnnotationCordon, `"GPU-not-on-this-node" names no card`)
	rep = vshareJSON[report.CardReport](t, ctx, cluster.Kubeconfig, kubectlvshare.ExitOK, "cards", "--node", node)
	if len(rep.Nodes) != 1 || len(rep.Nodes[0].Errors) != 1 || !rep.Nodes[0].Errors[0].Setting ||
		!strings.Contains(rep.Nodes[0].Errors[0].Message, bad) {
		t.Errorf("kubectl vshare cards errors %+v, want one setting problem naming %q", rep.Nodes, bad)
	}

	setCordon(ctx, t, node, "")
	if err := cluster.DeleteJob(ctx, ns, holder.Name); err != nil {
		t.Fatal(err)
	}
	if err := cluster.DeleteJob(ctx, ns, next.Name); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitJobRunning(ctx, ns, all.Name, 2*time.Minute); err != nil {
		t.Fatalf("after uncordoning: %v", err)
	}
}

// registeredCards returns the node's card UUIDs from its registration.
func registeredCards(ctx context.Context, t *testing.T, node string) []string {
	t.Helper()
	n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := vgpuproto.DecodeRegister(n.Annotations[vgpuproto.AnnotationRegister])
	if err != nil || len(reg) == 0 {
		t.Fatalf("node %s registration: %v (%d cards)", node, err, len(reg))
	}
	out := make([]string, len(reg))
	for i, c := range reg {
		out[i] = c.UUID
	}
	return out
}

// cardHolders returns, per "node/UUID", the pods of the jobs holding it.
func cardHolders(ctx context.Context, t *testing.T, ns string, jobs ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, job := range jobs {
		pods, err := cluster.JobPods(ctx, ns, job)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			checkAllocated(ctx, t, p, fmt.Sprint(vgpuMem(p)), "10")
			uuid := strings.SplitN(p.Annotations[vgpuproto.AnnotationIDs], ",", 2)[0]
			key := p.Spec.NodeName + "/" + uuid
			out[key] = append(out[key], p.Name)
		}
	}
	t.Logf("jobs %v: pods per card %v", jobs, out)
	return out
}

// vgpuMem is the pod's volcano.sh/vgpu-memory limit.
func vgpuMem(p v1.Pod) int64 {
	q := p.Spec.Containers[0].Resources.Limits[vgpuproto.ResourceMemory]
	return q.Value()
}

// setCordon sets the node's volcano.sh/vgpu-cordon to value, or removes it
// when value is empty, as `kubectl annotate node` does.
func setCordon(ctx context.Context, t *testing.T, node, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, vgpuproto.AnnotationCordon, v)
	if _, err := cluster.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate node %s %s=%q: %v", node, vgpuproto.AnnotationCordon, value, err)
	}
}

// waitUnschedulable waits until the job's PodGroup or pod says why it
// cannot be scheduled, with reason in the message, and checks no pod of the
// job is bound.
func waitUnschedulable(ctx context.Context, t *testing.T, ns, job, reason string) {
	t.Helper()
	var pg, pod string
	err := cluster.Poll(ctx, time.Minute, "job "+job+" unschedulable with "+reason, func(ctx context.Context) (bool, error) {
		pg, pod = cluster.UnschedulableMessages(ctx, ns, job)
		return strings.Contains(pg, reason) || strings.Contains(pod, reason), nil
	})
	if err != nil {
		t.Fatalf("%v; PodGroup says %q, pod says %q", err, pg, pod)
	}
	t.Logf("job %s waits: %s", job, pg+pod)
	pods, err := cluster.JobPods(ctx, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s, want it waiting", p.Name, p.Spec.NodeName)
		}
	}
}

// waitNodeEvent waits for an event on the node with the reason and a
// message holding every one of want.
func waitNodeEvent(ctx context.Context, t *testing.T, node, reason string, want ...string) {
	t.Helper()
	var seen []string
	err := cluster.Poll(ctx, time.Minute, "event "+reason+" on node "+node, func(ctx context.Context) (bool, error) {
		evs, err := cluster.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != reason {
				continue
			}
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(e.Message, w)
			}
			if ok {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%v; events on the node: %q", err, seen)
	}
}

// cordonedRow reports whether a row of the cards table names the card and
// has a CORDON cell of "card".
func cordonedRow(table, uuid string) bool {
	for _, line := range strings.Split(table, "\n") {
		fields := strings.Fields(line)
		hasCard, hasCordon := false, false
		for _, f := range fields {
			hasCard = hasCard || f == uuid
			hasCordon = hasCordon || f == "card"
		}
		if hasCard && hasCordon {
			return true
		}
	}
	return false
}
