//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/kubectlvshare"
	"github.com/vgpushare/vshare/kubectlvshare/report"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// kubectlNS is the namespace of TestKubectlVshare's objects.
const kubectlNS = "kubectl-vshare"

// vshareRun is one run of the kubectl-vshare binary.
type vshareRun struct {
	stdout, stderr string
	code           int
}

// vshare runs the built plugin with the kubeconfig, as `kubectl vshare`
// would, and returns what it printed and its exit code.
func vshare(t *testing.T, ctx context.Context, kubeconfig string, args ...string) vshareRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, binaries.Path(framework.BinKubectlVshare), append(args, "--kubeconfig", kubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run kubectl-vshare %v: %v", args, err)
	}
	return vshareRun{stdout: out.String(), stderr: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// vshareJSON runs the plugin with -o json, expects the exit code and
// decodes the report.
func vshareJSON[R any](t *testing.T, ctx context.Context, kubeconfig string, wantCode int, args ...string) R {
	t.Helper()
	r := vshare(t, ctx, kubeconfig, append(args, "-o", "json")...)
	if r.code != wantCode {
		t.Fatalf("kubectl vshare %v: exit code %d, want %d; stderr:\n%s", args, r.code, wantCode, r.stderr)
	}
	var rep R
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("kubectl vshare %v: %v\n%s", args, err, r.stdout)
	}
	return rep
}

// TestKubectlVshare runs the kubectl plugin's binary against the cluster
// and checks each command's output against what the cluster holds: the
// cards and pods of a running Job (as the pods' annotations say, decoded
// independently), where a shape fits and why not, why a pinned pod waits
// and which pods would have to free its card, a malformed registration and
// allocation shown as errors, a user without RBAC refused with exit code 1,
// and a user bound to the chart's read-only ClusterRole served.
func TestKubectlVshare(t *testing.T) {
	ctx := setup(t, kubectlNS, 3*time.Minute)
	admin := cluster.Kubeconfig
	share := framework.VGPUJob(kubectlNS, "share", framework.VGPUTask{Name: "s", Replicas: 2, VGPUs: 1, MemoryMiB: 12000, Cores: 30})
	mustRun(ctx, t, share)
	pods := waitAdmitted(ctx, t, share.Name, 2)

	t.Run("cards", func(t *testing.T) { checkCards(ctx, t, admin) })
	t.Run("pods", func(t *testing.T) { checkPods(ctx, t, admin, pods) })
	t.Run("fit", func(t *testing.T) { checkFit(ctx, t, admin) })
	t.Run("why", func(t *testing.T) { checkWhy(ctx, t, admin, pods[0]) })
	t.Run("malformed", func(t *testing.T) { checkMalformed(ctx, t, admin) })
	t.Run("rbac", func(t *testing.T) { checkRBAC(ctx, t) })
}

// waitAdmitted waits until the job's n pods are admitted by their agent
// (bind-phase success) and returns them.
func waitAdmitted(ctx context.Context, t *testing.T, job string, n int) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	err := cluster.Poll(ctx, time.Minute, job+" admitted", func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = cluster.JobPods(ctx, kubectlNS, job); err != nil {
			return false, err
		}
		ok := len(pods) == n
		for _, p := range pods {
			ok = ok && p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseSuccess
		}
		return ok, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pods, func(a, b v1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// checkCards compares every card of the GPU nodes with the cluster's
// usage as the harness decodes it from the annotations. Pods another test
// left terminating could leave between the two reads, so a difference is
// read again for a few seconds before it counts.
func checkCards(ctx context.Context, t *testing.T, kubeconfig string) {
	err := cluster.Poll(ctx, 15*time.Second, "kubectl vshare cards matching the annotations", func(ctx context.Context) (bool, error) {
		diffs := cardDiffs(ctx, t, kubeconfig)
		return len(diffs) == 0, errors.New(strings.Join(diffs, "\n"))
	})
	if err != nil {
		t.Error(err)
	}
	table := vshare(t, ctx, kubeconfig, "cards")
	for _, s := range []string{"NODE", "MEMORY(MiB)", kubectlNS + "/share-s-0", "idle)", "all nodes"} {
		if !strings.Contains(table.stdout, s) {
			t.Errorf("cards table does not show %q:\n%s", s, table.stdout)
		}
	}
	t.Logf("kubectl vshare cards --node %s:\n%s", gpuNodes[0], vshare(t, ctx, kubeconfig, "cards", "--node", gpuNodes[0]).stdout)
}

// cardDiffs lists where the plugin's cards of the GPU nodes differ from the
// registrations and allocations the harness decodes itself.
func cardDiffs(ctx context.Context, t *testing.T, kubeconfig string) []string {
	rep := vshareJSON[report.CardReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "cards")
	want, live := usageOf(ctx, t)
	var diffs []string
	seen := 0
	for _, n := range rep.Nodes {
		if !slices.Contains(gpuNodes, n.Name) {
			continue
		}
		for _, c := range n.Cards {
			seen++
			w, ok := want[n.Name+"/"+c.ID]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s card %s is not registered", n.Name, c.ID))
				continue
			}
			var holders []string
			var mem, cores int64
			for _, h := range w.Holders {
				if live[h.Pod] {
					holders = append(holders, fmt.Sprintf("%s %d/%d", h.Pod, h.MemoryMiB, h.Cores))
					mem, cores = mem+int64(h.MemoryMiB), cores+int64(h.Cores)
				}
			}
			var got []string
			for _, h := range c.Pods {
				got = append(got, fmt.Sprintf("%s/%s %d/%d", h.Namespace, h.Name, h.MemoryMiB, h.Cores))
			}
			slices.Sort(holders)
			slices.Sort(got)
			if !slices.Equal(holders, got) || c.MemoryUsedMiB != mem || c.CoresUsed != cores || c.Shares != len(holders) ||
				c.MemoryTotalMiB != int64(w.MemoryMiB) || c.Model != w.Type || c.Device != vgpu.Name {
				diffs = append(diffs, fmt.Sprintf("%s card %d %s: plugin says %s %d/%d MiB, %d cores, %d shares, holders %v; "+
					"annotations say %s %d/%d MiB, %d cores, holders %v", n.Name, c.Index, c.ID, c.Model, c.MemoryUsedMiB,
					c.MemoryTotalMiB, c.CoresUsed, c.Shares, got, w.Type, mem, w.MemoryMiB, cores, holders))
			}
		}
	}
	if seen != len(gpuNodes)*cardsPerNode {
		diffs = append(diffs, fmt.Sprintf("plugin listed %d cards of the GPU nodes, want %d", seen, len(gpuNodes)*cardsPerNode))
	}
	return diffs
}

// usageOf returns the cards by node/UUID with their holders, decoded by the
// harness, and which pods are live (not terminated).
func usageOf(ctx context.Context, t *testing.T) (map[string]framework.Card, map[string]bool) {
	t.Helper()
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := cluster.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, p := range all.Items {
		live[p.Namespace+"/"+p.Name] = p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
	}
	out := map[string]framework.Card{}
	for _, c := range cards {
		out[c.Node+"/"+c.UUID] = c
	}
	return out, live
}

// checkPods compares each pod's cards with its allocation annotation.
func checkPods(ctx context.Context, t *testing.T, kubeconfig string, pods []v1.Pod) {
	rep := vshareJSON[report.PodReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "pods", "-n", kubectlNS)
	byName := map[string]report.PodCards{}
	for _, p := range rep.Pods {
		byName[p.Name] = p
	}
	for _, pod := range pods {
		got := byName[pod.Name]
		ids, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
		if err != nil || len(ids) != 1 || len(ids[0]) != 1 {
			t.Fatalf("pod %s: allocation %q: %v", pod.Name, pod.Annotations[vgpuproto.AnnotationIDs], err)
		}
		d := ids[0][0]
		if got.Node != pod.Spec.NodeName || len(got.Cards) != 1 || got.Cards[0].ID != d.UUID || got.Cards[0].MemoryMiB != d.Mem ||
			got.Cards[0].Cores != int64(d.Cores) || got.BindPhase != vgpuproto.BindPhaseSuccess || got.Admitted != "yes" {
			t.Errorf("pod %s: plugin says %+v; the pod is on %s with %+v, bind phase %s", pod.Name, got, pod.Spec.NodeName, d,
				pod.Annotations[vgpuproto.AnnotationBindPhase])
		}
	}
	t.Logf("kubectl vshare pods -n %s:\n%s", kubectlNS, vshare(t, ctx, kubeconfig, "pods", "-n", kubectlNS).stdout)
}

// checkFit asks for a shape that fits both GPU nodes and one no card can
// hold.
func checkFit(ctx context.Context, t *testing.T, kubeconfig string) {
	fits := vshareJSON[report.FitReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "fit", "--memory", "20000", "--cores", "30", "--type", "A100")
	for _, n := range fits.Nodes {
		if slices.Contains(gpuNodes, n.Name) && (!n.Fits || len(n.Chosen) != 1) {
			t.Errorf("20000 MiB does not fit %s: %+v", n.Name, n)
		}
	}
	big := vshareJSON[report.FitReport](t, ctx, kubeconfig, kubectlvshare.ExitNoFit, "fit", "--memory", "50000")
	for _, n := range big.Nodes {
		if !slices.Contains(gpuNodes, n.Name) {
			continue
		}
		if n.Fits || len(n.Cards) != cardsPerNode {
			t.Errorf("50000 MiB on %s: %+v, want no fit and a verdict per card", n.Name, n)
		}
		for _, c := range n.Cards {
			if c.Reason != vgpu.ReasonCardTooSmall || c.Resolvable {
				t.Errorf("50000 MiB on %s card %d: %q (resolvable %v), want %q", n.Name, c.Index, c.Reason, c.Resolvable, vgpu.ReasonCardTooSmall)
			}
		}
	}
	r := vshare(t, ctx, kubeconfig, "fit", "--memory", "50000")
	if !strings.Contains(r.stdout, vgpu.ReasonCardTooSmall) || !strings.Contains(r.stdout, "fits no node") {
		t.Errorf("fit table does not name the per-card reason:\n%s", r.stdout)
	}
	t.Logf("kubectl vshare fit --memory 20000 --cores 30 --type A100:\n%s",
		vshare(t, ctx, kubeconfig, "fit", "--memory", "20000", "--cores", "30", "--type", "A100").stdout)
}

// checkWhy pins a whole-card pod to the card holding target: it waits, and
// the plugin names the scheduler's reason and the pods on that card.
func checkWhy(ctx context.Context, t *testing.T, kubeconfig string, target v1.Pod) {
	ids, _ := vgpuproto.DecodeAllocation(target.Annotations[vgpuproto.AnnotationIDs])
	uuid := ids[0][0].UUID
	wait := framework.VGPUJob(kubectlNS, "wait", framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: 30000, Cores: 100,
		Annotations:  map[string]string{vgpuproto.AnnotationUseUUID: uuid},
		NodeSelector: map[string]string{"kubernetes.io/hostname": target.Spec.NodeName}})
	if err := cluster.CreateJob(ctx, wait); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), kubectlNS, wait.Name) })
	err := cluster.Poll(ctx, time.Minute, "wait's reason recorded", func(ctx context.Context) (bool, error) {
		pg, pod := cluster.UnschedulableMessages(ctx, kubectlNS, wait.Name)
		return strings.Contains(pg+pod, vgpu.ReasonExclusiveBusy), fmt.Errorf("podgroup %q, pod %q", pg, pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, kubectlNS, wait.Name)
	if err != nil || len(pods) != 1 {
		t.Fatalf("wait's pods: %v, %v", pods, err)
	}
	rep := vshareJSON[report.WhyReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "why", pods[0].Name, "-n", kubectlNS)
	if !rep.Waiting || rep.PodGroup == nil || !slices.ContainsFunc(rep.Recorded, func(r report.RecordedReason) bool {
		return r.Reason == vgpu.ReasonExclusiveBusy && r.Nodes == 1
	}) {
		t.Errorf("why %s: waiting %v, PodGroup %+v, recorded %+v; want the scheduler's %q on 1 node", pods[0].Name, rep.Waiting,
			rep.PodGroup, rep.Recorded, vgpu.ReasonExclusiveBusy)
	}
	want, live := usageOf(ctx, t)
	var holders, freed []string
	for _, h := range want[target.Spec.NodeName+"/"+uuid].Holders {
		if live[h.Pod] {
			holders = append(holders, h.Pod)
		}
	}
	for _, f := range rep.FreeUp {
		for _, p := range f.Pods {
			freed = append(freed, f.Node+" "+p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(holders)
	for i := range holders {
		holders[i] = target.Spec.NodeName + " " + holders[i]
	}
	if !slices.Equal(holders, freed) {
		t.Errorf("why %s: free up %v, want the holders of %s on %s: %v", pods[0].Name, freed, uuid, target.Spec.NodeName, holders)
	}
	table := vshare(t, ctx, kubeconfig, "why", pods[0].Name, "-n", kubectlNS)
	if !strings.Contains(table.stdout, "What would have to free up") || !strings.Contains(table.stdout, target.Name) {
		t.Errorf("why table does not name %s:\n%s", target.Name, table.stdout)
	}
	t.Logf("kubectl vshare why %s:\n%s", pods[0].Name, table.stdout)
	bound := vshareJSON[report.WhyReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "why", target.Name, "-n", kubectlNS)
	if bound.Waiting || bound.Node != target.Spec.NodeName {
		t.Errorf("why %s (bound): %+v", target.Name, bound)
	}
}

// checkMalformed adds two cordoned nodes without agents, one with a
// malformed registration and one with a pod whose allocation is malformed:
// both show as errors naming the object and the annotation.
func checkMalformed(ctx context.Context, t *testing.T, kubeconfig string) {
	extra := v1.ResourceList{vgpuproto.ResourceNumber: resource.MustParse("20")}
	odd := vgpuproto.EncodeRegister([]vgpuproto.Card{{UUID: "GPU-odd-0", Count: 10, MemMiB: 16384, Type: "NVIDIA-Tesla-T4", Healthy: true}})
	for name, reg := range map[string]string{"kv-broken": "GPU-x,ten,40960,NVIDIA-A100,true:", "kv-odd": odd} {
		if err := cluster.AddNode(ctx, name, extra, map[string]string{vgpuproto.AnnotationRegister: reg}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), name) })
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := cluster.Kube.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bad := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: kubectlNS, Name: "kv-bad",
			Annotations: map[string]string{vgpuproto.AnnotationIDs: "GPU-odd-0,NVIDIA,lots,0:", vgpuproto.AnnotationBindPhase: "allocating"}},
		Spec: v1.PodSpec{SchedulerName: "volcano", NodeName: "kv-odd", Containers: []v1.Container{{Name: "c", Image: "busybox",
			Resources: v1.ResourceRequirements{Limits: extra}}}},
	}
	if _, err := cluster.Kube.CoreV1().Pods(kubectlNS).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Pods(kubectlNS).Delete(context.Background(), bad.Name, metav1.DeleteOptions{})
	})

	rep := vshareJSON[report.CardReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "cards")
	nodes := map[string]report.NodeCards{}
	for _, n := range rep.Nodes {
		nodes[n.Name] = n
	}
	if n := nodes["kv-broken"]; !n.Cordoned || len(n.Cards) != 0 || len(n.Errors) != 1 ||
		!strings.Contains(n.Errors[0].Message, vgpuproto.AnnotationRegister) || !strings.Contains(n.Errors[0].Message, `"ten"`) {
		t.Errorf("kv-broken: %+v, want no cards and an error naming the registration and its bad count", n)
	}
	if n := nodes["kv-odd"]; len(n.Cards) != 1 || n.Cards[0].Shares != 0 || len(n.Errors) != 1 ||
		n.Errors[0].Pod != kubectlNS+"/kv-bad" || !strings.Contains(n.Errors[0].Message, `"lots"`) {
		t.Errorf("kv-odd: %+v, want its card free and kv-bad's allocation as an error", n)
	}
	pods := vshareJSON[report.PodReport](t, ctx, kubeconfig, kubectlvshare.ExitOK, "pods", "-n", kubectlNS)
	if i := slices.IndexFunc(pods.Pods, func(p report.PodCards) bool { return p.Name == "kv-bad" }); i < 0 ||
		len(pods.Pods[i].Errors) != 1 || len(pods.Pods[i].Cards) != 0 {
		t.Errorf("pods: kv-bad not reported with its malformed allocation: %+v", pods.Pods)
	}
	table := vshare(t, ctx, kubeconfig, "cards", "-l", "type=kwok")
	if !strings.Contains(table.stdout, "registration [") || !strings.Contains(table.stdout, kubectlNS+"/kv-bad [") {
		t.Errorf("cards table does not show the errors per node and pod:\n%s", table.stdout)
	}
	t.Logf("kubectl vshare cards with malformed annotations:\n%s", table.stdout)
}

// checkRBAC runs the plugin as a ServiceAccount without permissions and as
// one bound to the chart's kubectlReader ClusterRole.
func checkRBAC(ctx context.Context, t *testing.T) {
	for _, sa := range []string{"kv-nobody", "kv-reader"} {
		_, err := cluster.Kube.CoreV1().ServiceAccounts(kubectlNS).Create(ctx,
			&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	nobody, err := cluster.ServiceAccountKubeconfig(ctx, kubectlNS, "kv-nobody")
	if err != nil {
		t.Fatal(err)
	}
	user := framework.ServiceAccountUser(kubectlNS, "kv-nobody")
	for _, args := range [][]string{{"cards"}, {"pods", "-n", kubectlNS}, {"why", "share-s-0", "-n", kubectlNS}} {
		r := vshare(t, ctx, nobody, args...)
		if r.code != kubectlvshare.ExitError || r.stdout != "" || !strings.Contains(r.stderr, "forbidden: cannot") ||
			!strings.Contains(r.stderr, user) {
			t.Errorf("kubectl vshare %v as %s: exit %d, stdout %q, stderr %q; want exit 1 and a forbidden error naming the user",
				args, user, r.code, r.stdout, r.stderr)
		}
	}
	t.Logf("as a user without RBAC: %s", strings.TrimSpace(vshare(t, ctx, nobody, "cards").stderr))

	reader := bindReader(ctx, t, "kv-reader")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"cards"}, kubectlvshare.ExitOK},
		{[]string{"pods", "-A"}, kubectlvshare.ExitOK},
		{[]string{"fit", "--memory", "50000"}, kubectlvshare.ExitNoFit},
		{[]string{"why", "share-s-0", "-n", kubectlNS}, kubectlvshare.ExitOK},
	} {
		// RBAC bindings reach the authorizer's cache shortly after creation.
		err := cluster.Poll(ctx, 30*time.Second, "kubectl vshare as the reader", func(context.Context) (bool, error) {
			r := vshare(t, ctx, reader, tc.args...)
			return r.code == tc.code, fmt.Errorf("%v: exit %d, stderr %q", tc.args, r.code, r.stderr)
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// bindReader creates the chart's kubectlReader ClusterRole (rendered with
// helm), binds it to the ServiceAccount sa and returns a kubeconfig of sa.
func bindReader(ctx context.Context, t *testing.T, sa string) string {
	t.Helper()
	const role = "kv-reader-e2e"
	out, err := helmFor(t, ctx).Template(ctx, chartDir, "vshare", kubectlNS, "--set", "kubectlReader.create=true",
		"--set", "kubectlReader.name="+role, "--show-only", "templates/kubectl-reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(out)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the chart's kubectl reader: %d objects, %v", len(objs), err)
	}
	var cr rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &cr); err != nil {
		t.Fatal(err)
	}
	rbac := cluster.Kube.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kubectlNS, Name: sa}}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{}) })
	reader, err := cluster.ServiceAccountKubeconfig(ctx, kubectlNS, sa)
	if err != nil {
		t.Fatal(err)
	}
	return reader
}
