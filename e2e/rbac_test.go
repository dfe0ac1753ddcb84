//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// eventAllocationFailed is the reason of the agent's event on a pod it
// refuses (vgpu-device-plugin/allocate, which this package cannot link:
// it brings in go-nvml's cgo bindings). The annotation names are in
// vgpu_test.go and forged_test.go.
const eventAllocationFailed = "VGPUAllocationFailed"

// Names of TestSecurityRBACAudit's release.
const (
	auditNS        = "rbac-audit"
	auditScheduler = "audit-scheduler"
	auditAgent     = "audit-agent"
	auditConfigMap = "audit-device-config"
	auditNode      = "audit-node"
)

// TestSecurityRBACAudit runs our scheduler and node agent as the chart
// deploys them: under the chart's ServiceAccounts and RBAC (created for
// real), with the chart's scheduler configuration and command lines. It
// drives every path that calls the API (a pod that takes the node lock, a
// gang whose second bind waits for the agent to serve the first, a rejected
// device ConfigMap edit repeated, a pod the agent refuses) and reads what each ServiceAccount did from the API
// server's audit log: no request was refused, every verb our roles grant
// was used, and every request of the agent is one of its roles' rules.
// deploy's TestRBACGrantsExactlyTheCallsInTheSource checks the same
// rules against every call in the source.
func TestSecurityRBACAudit(t *testing.T) {
	ctx := setup(t, auditNS, 10*time.Minute)
	helm := helmFor(t, ctx)
	out, err := helm.Template(ctx, chartDir, "vshare", auditNS,
		"--set", "scheduler.name="+auditScheduler, "--set", "devicePlugin.name="+auditAgent,
		"--set", "deviceConfig.namespace="+auditNS, "--set", "deviceConfig.name="+auditConfigMap,
		"--set", "deviceshare.AscendMindClusterVNPUEnable=true", "--set", "deviceshare.NodeLockEnable=true")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	createRBAC(t, ctx, objs, auditNS)
	grants := chartGrants(t, objs)
	var deployment appsv1.Deployment
	var daemonSet appsv1.DaemonSet
	var schedConf string
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			// The scheduler's; the webhook's runs under its own
			// ServiceAccount (TestAdmission on the real node).
			if o.GetName() == auditScheduler {
				fromUnstructured(t, o, &deployment)
			}
		case "DaemonSet":
			fromUnstructured(t, o, &daemonSet)
		case "ConfigMap":
			var cm v1.ConfigMap
			fromUnstructured(t, o, &cm)
			if c, ok := cm.Data["volcano-scheduler.conf"]; ok {
				schedConf = c
			}
		}
	}
	if schedConf == "" || deployment.Name == "" || daemonSet.Name == "" {
		t.Fatal("the chart rendered no scheduler configuration, Deployment or DaemonSet")
	}

	// Only our scheduler, under its ServiceAccount, schedules meanwhile.
	cluster.StopScheduler()
	t.Cleanup(func() {
		if err := cluster.StartScheduler(context.Background()); err != nil {
			t.Errorf("restart the harness's scheduler: %v", err)
		}
	})
	agent := startAuditAgent(t, ctx, &daemonSet)
	sched := startAuditScheduler(t, ctx, &deployment, schedConf)

	exerciseNodeLock(t, ctx)
	sched.setArgument(t, ctx, "deviceshare.NodeLockEnable: true", "deviceshare.NodeLockEnable: false")
	exerciseAgentTurn(t, ctx, agent)
	exerciseRepeatedConfigRejection(t, ctx)
	exerciseAgentRefusal(t, ctx)

	schedUser := framework.ServiceAccountUser(auditNS, auditScheduler)
	agentUser := framework.ServiceAccountUser(auditNS, auditAgent)
	var scheduled, agentReqs []framework.AuditRequest
	var missing []grant
	if err := cluster.Poll(ctx, 2*time.Minute, "every verb our roles grant", func(context.Context) (bool, error) {
		var err error
		if scheduled, err = cluster.AuditRequests(schedUser); err != nil {
			return false, err
		}
		if agentReqs, err = cluster.AuditRequests(agentUser); err != nil {
			return false, err
		}
		missing = append(unexercised(grants.ours(auditScheduler), scheduled), unexercised(grants.ours(auditAgent), agentReqs)...)
		return len(missing) == 0, nil
	}); err != nil {
		t.Fatalf("%v; never used: %v", err, missing)
	}

	for _, c := range []struct {
		sa   string
		reqs []framework.AuditRequest
	}{{auditScheduler, scheduled}, {auditAgent, agentReqs}} {
		ours := grants.ours(c.sa)
		for _, r := range c.reqs {
			if r.Code == 401 || r.Code == 403 {
				t.Errorf("%s: %s %s refused (%d): %s", c.sa, r.Verb, r.RequestURI, r.Code, r.UserAgent)
			}
		}
		for _, g := range unexercised(ours, c.reqs) {
			t.Errorf("%s: %s is granted but was never used", c.sa, g)
		}
		kinds := requestKinds(c.reqs)
		var volcanoOnly []string
		for _, k := range kinds {
			if k.r.Resource == "" {
				continue // discovery (non-resource URLs), granted to every authenticated user
			}
			switch {
			case allowedBy(ours, k.r):
			case c.sa == auditScheduler && allowedBy(grants.volcano, k.r):
				volcanoOnly = append(volcanoOnly, k.key)
			default:
				t.Errorf("%s: %s is not one of our roles' rules", c.sa, k.key)
			}
		}
		t.Logf("%s: %d requests of %d kinds, no refusal; our roles grant %d verbs, all used; %d kinds only Volcano's ClusterRole grants (Volcano's own code): %s",
			c.sa, len(c.reqs), len(kinds), len(ours), len(volcanoOnly), strings.Join(volcanoOnly, ", "))
	}
}

// grant is one verb on one resource, granted by one rule of a role.
type grant struct {
	role, namespace       string // namespace: "" for a ClusterRole
	group, resource, verb string
	resourceNames         []string
}

func (g grant) String() string {
	s := g.verb + " " + g.resource
	if g.group != "" {
		s = g.verb + " " + g.group + "/" + g.resource
	}
	if g.namespace != "" {
		s += " in " + g.namespace
	}
	if len(g.resourceNames) > 0 {
		s += " named " + strings.Join(g.resourceNames, ",")
	}
	return s + " (" + g.role + ")"
}

func (g grant) allows(r framework.AuditRequest) bool {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if g.group != r.APIGroup || g.resource != res || g.verb != r.Verb {
		return false
	}
	if g.namespace != "" && g.namespace != r.Namespace {
		return false
	}
	if len(g.resourceNames) > 0 {
		for _, n := range g.resourceNames {
			if n == r.Name {
				return true
			}
		}
		return false
	}
	return true
}

// grants are the chart's rules by ServiceAccount.
type grants struct {
	bySA    map[string][]grant
	volcano []grant // Volcano's scheduler ClusterRole, copied from its chart
}

func (g grants) ours(sa string) []grant { return g.bySA[sa] }

func allowedBy(gs []grant, r framework.AuditRequest) bool {
	for _, g := range gs {
		if g.allows(r) {
			return true
		}
	}
	return false
}

// unexercised returns the grants no request used.
func unexercised(gs []grant, reqs []framework.AuditRequest) []grant {
	var out []grant
	for _, g := range gs {
		used := false
		for _, r := range reqs {
			if r.Code < 400 && g.allows(r) {
				used = true
				break
			}
		}
		if !used {
			out = append(out, g)
		}
	}
	return out
}

type requestKind struct {
	key string
	r   framework.AuditRequest
}

// requestKinds returns one request of each verb, resource and namespace.
func requestKinds(reqs []framework.AuditRequest) []requestKind {
	seen := map[string]bool{}
	var out []requestKind
	for _, r := range reqs {
		res := r.Resource
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		if r.APIGroup != "" {
			res = r.APIGroup + "/" + res
		}
		key := r.Verb + " " + res
		if r.Resource == "" {
			key = r.Verb + " " + strings.SplitN(r.RequestURI, "?", 2)[0]
		}
		if r.Namespace != "" {
			key += " in " + r.Namespace
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, requestKind{key, r})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// chartGrants reads the rendered roles and the bindings to each
// ServiceAccount. Volcano's scheduler ClusterRole (named as the scheduler)
// is kept apart.
func chartGrants(t *testing.T, objs []*unstructured.Unstructured) grants {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	ns := map[string]string{}
	var bindings []struct {
		roleKey, namespace string
		subjects           []rbacv1.Subject
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			fromUnstructured(t, o, &r)
			rules["ClusterRole/"+r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			fromUnstructured(t, o, &r)
			key := "Role/" + r.Namespace + "/" + r.Name
			rules[key], ns[key] = r.Rules, r.Namespace
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			fromUnstructured(t, o, &b)
			bindings = append(bindings, struct {
				roleKey, namespace string
				subjects           []rbacv1.Subject
			}{"ClusterRole/" + b.RoleRef.Name, "", b.Subjects})
		case "RoleBinding":
			var b rbacv1.RoleBinding
			fromUnstructured(t, o, &b)
			bindings = append(bindings, struct {
				roleKey, namespace string
				subjects           []rbacv1.Subject
			}{"Role/" + b.Namespace + "/" + b.RoleRef.Name, b.Namespace, b.Subjects})
		}
	}
	expand := func(key string) []grant {
		var out []grant
		for _, r := range rules[key] {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, grant{role: key, namespace: ns[key], group: g, resource: res, verb: v, resourceNames: r.ResourceNames})
					}
				}
			}
		}
		return out
	}
	out := grants{bySA: map[string][]grant{}}
	volcanoKey := "ClusterRole/" + auditScheduler
	for _, b := range bindings {
		if _, ok := rules[b.roleKey]; !ok {
			t.Fatalf("binding to %s, which the chart does not render", b.roleKey)
		}
		for _, s := range b.subjects {
			if s.Kind != "ServiceAccount" {
				continue
			}
			if b.roleKey == volcanoKey {
				out.volcano = expand(b.roleKey)
				continue
			}
			out.bySA[s.Name] = append(out.bySA[s.Name], expand(b.roleKey)...)
		}
	}
	if len(out.volcano) == 0 || len(out.bySA[auditScheduler]) == 0 || len(out.bySA[auditAgent]) == 0 {
		t.Fatal("the chart binds no roles to the scheduler or the agent")
	}
	return out
}

// rewriteArgs returns a container's command line with the flags in set
// replaced (a flag set to "" is dropped) and the rest kept.
func rewriteArgs(args []string, set map[string]string) []string {
	var out []string
	done := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if v, ok := set[name]; ok {
			done[name] = true
			if v != "" {
				out = append(out, "--"+name+"="+v)
			}
			continue
		}
		out = append(out, a)
	}
	for name, v := range set {
		if !done[name] && v != "" {
			out = append(out, "--"+name+"="+v)
		}
	}
	return out
}

// startAuditAgent creates the audit node with its fake kubelet and runs
// the agent with the DaemonSet's command line, under the agent's
// ServiceAccount, on go-nvml's mock DGX A100.
func startAuditAgent(t *testing.T, ctx context.Context, ds *appsv1.DaemonSet) *framework.Process {
	t.Helper()
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, auditNS, auditAgent)
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: auditNode, Annotations: map[string]string{framework.KwokNodeAnnotation: "fake"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": auditNode}},
		Status: v1.NodeStatus{Phase: v1.NodeRunning, Capacity: v1.ResourceList{v1.ResourceCPU: resourceQty("64"), v1.ResourceMemory: resourceQty("512Gi"),
			v1.ResourcePods: resourceQty("110")}},
	}
	node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	if _, err := cluster.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), auditNode) })
	dir := filepath.Join(cluster.WorkDir, "nodes", auditNode)
	for _, d := range []string{"dp", "cache"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kubelet, err := framework.StartFakeKubelet(ctx, auditNode, filepath.Join(dir, "dp"), cluster.Kube)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.Stop)
	ports, err := framework.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	set := map[string]string{
		"kubeconfig": kubeconfig, "node-name": auditNode, "nvml": "mock:dgxa100",
		"kubelet-socket-dir": filepath.Join(dir, "dp"), "cache-dir": filepath.Join(dir, "cache"),
		"libvgpu-host-path": filepath.Join(dir, "libvgpu.so"), "metrics-address": fmt.Sprintf("127.0.0.1:%d", ports[0]),
	}
	if hasFlag(c.Args, "allocation-key-file") {
		set["allocation-key-file"] = cluster.AllocationKeyFile()
	}
	args := rewriteArgs(c.Args, set)
	p, err := cluster.StartDetached(auditAgent, framework.BinDevicePlugin, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Resume(); p.Stop() })
	waitAudit(t, ctx, "the audit node's vGPUs registered", func() (bool, error) {
		if gone, why := p.Exited(); gone {
			return false, fmt.Errorf("agent %v:\n%s", why, p.Tail(30))
		}
		n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, auditNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[framework.VGPUNumber]
		return n.Annotations[vgpuproto.AnnotationRegister] != "" && q.Value() > 0, nil
	})
	return p
}

// startAuditScheduler runs our scheduler with the Deployment's command
// line and the chart's volcano-scheduler.conf, under the scheduler's
// ServiceAccount.
func startAuditScheduler(t *testing.T, ctx context.Context, d *appsv1.Deployment, conf string) schedulerRun {
	t.Helper()
	kubeconfig, err := cluster.ServiceAccountKubeconfig(ctx, auditNS, auditScheduler)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	confPath := filepath.Join(dir, "volcano-scheduler.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := framework.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	set := map[string]string{
		"kubeconfig": kubeconfig, "scheduler-conf": confPath, "logtostderr": "true",
		"listen-address": fmt.Sprintf("127.0.0.1:%d", ports[0]), "healthz-address": fmt.Sprintf("127.0.0.1:%d", ports[1]),
	}
	if hasFlag(c.Args, "allocation-key-file") {
		set["allocation-key-file"] = cluster.AllocationKeyFile()
	}
	args := rewriteArgs(c.Args, set)
	p, err := cluster.StartDetached(auditScheduler, framework.BinScheduler, args, []string{"DEBUG_SOCKET_DIR=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1])
	waitAudit(t, ctx, "the audit scheduler's /healthz", func() (bool, error) {
		if gone, why := p.Exited(); gone {
			return false, fmt.Errorf("scheduler %v:\n%s", why, p.Tail(30))
		}
		return httpOKCtx(ctx, healthz), nil
	})
	return schedulerRun{p: p, conf: confPath}
}

// schedulerRun is the scheduler TestSecurityRBACAudit runs.
type schedulerRun struct {
	p    *framework.Process
	conf string
}

// setArgument rewrites one deviceshare argument of the running scheduler's
// volcano-scheduler.conf (replaced by a rename, as a ConfigMap update is)
// and waits until Volcano has loaded it: arguments apply from the next
// session on, without a restart.
func (s schedulerRun) setArgument(t *testing.T, ctx context.Context, from, to string) {
	t.Helper()
	data, err := os.ReadFile(s.conf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("the chart's volcano-scheduler.conf has no %q", from)
	}
	loaded := func() int {
		log, err := os.ReadFile(s.p.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(log), "Successfully loaded Scheduler conf")
	}
	before := loaded()
	tmp := filepath.Join(t.TempDir(), "conf") // outside the watched directory: one event, on the rename
	if err := os.WriteFile(tmp, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.conf); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, ctx, "the scheduler reloading its configuration", func() (bool, error) { return loaded() > before, nil })
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); n == name {
			return true
		}
	}
	return false
}

// exerciseNodeLock runs a pod on the audit node with
// deviceshare.NodeLockEnable: the scheduler takes the node lock (nodes get,
// update) and binds (pods/binding); the agent serves the pod (pods patch)
// and releases the lock (nodes get, update).
func exerciseNodeLock(t *testing.T, ctx context.Context) {
	t.Helper()
	runAuditJob(t, ctx, "locked", 1)
}

// exerciseAgentTurn runs a gang of two pods on the audit node, without the
// node lock, while the agent is paused: the scheduler binds one and holds
// the other until the agent serves the first, reading it from its pod
// informer. The Job is then deleted: the first pod leaves the informer, so
// the binder asks the API server for it (the GET seen in the audit log)
// and finds it gone.
func exerciseAgentTurn(t *testing.T, ctx context.Context, agent *framework.Process) {
	t.Helper()
	if err := agent.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := agent.Resume(); err != nil {
			t.Error(err)
		}
	}()
	job := framework.VGPUJob(auditNS, "gang", framework.VGPUTask{Name: "worker", Replicas: 2, VGPUs: 1, MemoryMiB: 1000,
		NodeSelector: map[string]string{"kubernetes.io/hostname": auditNode}})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, ctx, "one pod of the gang bound, the other held for the agent's turn", func() (bool, error) {
		pods, err := cluster.JobPods(ctx, auditNS, "gang")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 1, nil
	})
	if err := cluster.DeleteJob(ctx, auditNS, "gang"); err != nil {
		t.Fatal(err)
	}
	schedUser := framework.ServiceAccountUser(auditNS, auditScheduler)
	waitAudit(t, ctx, "the scheduler reading the pod bound before once it left the informer", func() (bool, error) {
		reqs, err := cluster.AuditRequests(schedUser)
		if err != nil {
			return false, err
		}
		for _, r := range reqs {
			if r.Verb == "get" && r.Resource == "pods" && r.Namespace == auditNS {
				return true, nil
			}
		}
		return false, nil
	})
}

// runAuditJob runs a Job of n one-vGPU pods on the audit node until the
// agent has served them all.
func runAuditJob(t *testing.T, ctx context.Context, name string, n int32) {
	t.Helper()
	job := framework.VGPUJob(auditNS, name, framework.VGPUTask{Name: "worker", Replicas: n, VGPUs: 1, MemoryMiB: 1000,
		NodeSelector: map[string]string{"kubernetes.io/hostname": auditNode}})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	waitJobServed(t, ctx, name, n)
}

// waitJobServed waits until the Job runs and the agent has served its n
// pods (bind-phase success).
func waitJobServed(t *testing.T, ctx context.Context, name string, n int32) {
	t.Helper()
	if err := cluster.WaitJobRunning(ctx, auditNS, name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, ctx, "bind-phase success on the pods of "+name, func() (bool, error) {
		pods, err := cluster.JobPods(ctx, auditNS, name)
		if err != nil || len(pods) != int(n) {
			return false, err
		}
		for _, p := range pods {
			if p.Annotations[vgpuproto.AnnotationBindPhase] != "success" {
				return false, nil
			}
		}
		return true, nil
	})
}

// exerciseRepeatedConfigRejection breaks the device ConfigMap twice with
// the same document: the scheduler records an InvalidDeviceConfig event,
// then patches its count.
func exerciseRepeatedConfigRejection(t *testing.T, ctx context.Context) {
	t.Helper()
	cms := cluster.Kube.CoreV1().ConfigMaps(auditNS)
	cm, err := cms.Get(ctx, auditConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := cm.Data[config.ConfigKey]
	t.Cleanup(func() {
		cm, err := cms.Get(context.Background(), auditConfigMap, metav1.GetOptions{})
		if err == nil {
			cm.Data[config.ConfigKey] = good
			_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restore the device ConfigMap: %v", err)
		}
	})
	for i := 0; i < 2; i++ {
		cm, err := cms.Get(ctx, auditConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data[config.ConfigKey] = "nvidia: {deviceSplitCount: 0}\n"
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["edit"] = fmt.Sprint(i) // a new resourceVersion with the same document
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := int32(i + 1)
		waitAudit(t, ctx, fmt.Sprintf("InvalidDeviceConfig event with count %d", want), func() (bool, error) {
			evs, err := cluster.Kube.CoreV1().Events(auditNS).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + auditConfigMap + ",reason=" + config.ReasonInvalidDeviceConfig})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Count >= want {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// exerciseAgentRefusal binds a pod with a forged allocation to the audit
// node: the agent refuses it and records a Warning event (events create).
// It records no second one on that pod (the pod is marked failed), so it
// never patches an event, and is not granted to.
func exerciseAgentRefusal(t *testing.T, ctx context.Context) {
	t.Helper()
	now := fmt.Sprint(time.Now().Unix())
	forged := "GPU-00000000-0000-0000-0000-000000000000,NVIDIA,1000,0:"
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: auditNS, Name: "forged", Annotations: map[string]string{
			vgpuproto.AnnotationIDs: forged, vgpuproto.AnnotationToAllocate: forged, vgpuproto.AnnotationNode: auditNode,
			vgpuproto.AnnotationTime: now, vgpuproto.AnnotationBindTime: now, vgpuproto.AnnotationBindPhase: "allocating",
		}},
		Spec: v1.PodSpec{SchedulerName: "volcano", NodeName: auditNode, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "cuda", Image: "nvidia/cuda:12.4.1-base-ubuntu22.04", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{framework.VGPUNumber: resourceQty("1"), "volcano.sh/vgpu-memory": resourceQty("1000")}}}}},
	}
	pods := cluster.Kube.CoreV1().Pods(auditNS)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), "forged", metav1.DeleteOptions{}) })
	waitAudit(t, ctx, "the agent's refusal event", func() (bool, error) {
		evs, err := cluster.Kube.CoreV1().Events(auditNS).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(created.UID) + ",reason=" + eventAllocationFailed})
		if err != nil {
			return false, err
		}
		return len(evs.Items) > 0, nil
	})
}

func waitAudit(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	if err := cluster.Poll(ctx, 2*time.Minute, what, func(context.Context) (bool, error) { return cond() }); err != nil {
		t.Fatal(err)
	}
}

// createRBAC creates the chart's ServiceAccounts, roles, bindings and
// ConfigMaps for real, and deletes them when the test ends.
func createRBAC(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured, namespace string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var gvr schema.GroupVersionResource
		switch o.GetKind() {
		case "ServiceAccount", "ConfigMap":
			gvr = v1.SchemeGroupVersion.WithResource(strings.ToLower(o.GetKind()) + "s")
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			gvr = rbacv1.SchemeGroupVersion.WithResource(strings.ToLower(o.GetKind()) + "s")
		default:
			continue
		}
		ri := dyn.Resource(gvr).Namespace(o.GetNamespace())
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s: %v", framework.ObjectRef(o), err)
		}
		t.Cleanup(func() { _ = ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	}
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }
