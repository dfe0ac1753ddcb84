package deploy_test

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/deploy"
)

// TestPlainManifestsLeastPrivilege: the chart's defaults give each pod no
// more than docs/security.md says it needs. The scheduler: no root, no
// capability, read-only root filesystem, the runtime's seccomp profile.
// The webhook: as the scheduler, and no host path. The agent: root with the CHOWN capability only, not privileged, no host
// namespaces, exactly its three host directories (libvgpu's read-only), and
// an init container with no capability.
func TestPlainManifestsLeastPrivilege(t *testing.T) {
	ms, err := deploy.ReadManifests(deploy.PlainManifests)
	if err != nil {
		t.Fatal(err)
	}
	all, err := deploy.OfKind[appsv1.Deployment](ms, "Deployment")
	if err != nil || len(all) != 2 {
		t.Fatalf("Deployments: %d, %v; want the scheduler's and the webhook's", len(all), err)
	}
	var deps, hooks []appsv1.Deployment
	for _, d := range all {
		if d.Name == "vshare-webhook" {
			hooks = append(hooks, d)
		} else {
			deps = append(deps, d)
		}
	}
	if len(hooks) != 1 {
		t.Fatalf("no vshare-webhook Deployment among %d", len(all))
	}
	hook := hooks[0].Spec.Template.Spec
	if hook.HostNetwork || hook.HostPID || hook.HostIPC || len(hook.Volumes) != len(nonHostPath(hook.Volumes)) {
		t.Error("the webhook's pod shares a host namespace or mounts a host path")
	}
	if hc := hook.Containers[0].SecurityContext; hc == nil || hc.RunAsNonRoot == nil || !*hc.RunAsNonRoot || hc.RunAsUser == nil || *hc.RunAsUser == 0 {
		t.Error("webhook may run as root")
	}
	checkRestricted(t, "webhook", hook.Containers[0].SecurityContext, nil)
	dss, err := deploy.OfKind[appsv1.DaemonSet](ms, "DaemonSet")
	if err != nil || len(dss) != 1 {
		t.Fatalf("DaemonSets: %d, %v; want the agent's", len(dss), err)
	}
	for _, spec := range []v1.PodSpec{deps[0].Spec.Template.Spec, dss[0].Spec.Template.Spec} {
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("pod of %s shares a host namespace", spec.ServiceAccountName)
		}
	}

	sched := deps[0].Spec.Template.Spec
	if len(sched.Volumes) != len(nonHostPath(sched.Volumes)) {
		t.Error("the scheduler mounts a host path")
	}
	sc := sched.Containers[0].SecurityContext
	switch {
	case sc == nil:
		t.Fatal("scheduler container has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0:
		t.Error("scheduler may run as root")
	}
	checkRestricted(t, "scheduler", sc, nil)

	agent := dss[0].Spec.Template.Spec
	ac := agent.Containers[0].SecurityContext
	if ac == nil || ac.RunAsUser == nil || *ac.RunAsUser != 0 {
		t.Error("agent container does not say it runs as root (the host directories are root's)")
	}
	checkRestricted(t, "agent", ac, []v1.Capability{"CHOWN"})
	for _, c := range agent.InitContainers {
		checkRestricted(t, "init container "+c.Name, c.SecurityContext, nil)
	}
	var hostPaths []string
	for _, v := range agent.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	sort.Strings(hostPaths)
	if diff := cmp.Diff([]string{"/usr/local/vgpu", "/var/lib/kubelet/device-plugins", "/var/lib/vgpu"}, hostPaths); diff != "" {
		t.Errorf("agent host paths (-want +got):\n%s", diff)
	}
	for _, m := range agent.Containers[0].VolumeMounts {
		if m.Name == "libvgpu" && !m.ReadOnly {
			t.Error("the agent mounts libvgpu's directory writable; only the init container installs it")
		}
	}
}

// checkRestricted: not privileged, no privilege escalation, read-only root
// filesystem, RuntimeDefault seccomp, every capability dropped and only add
// added.
func checkRestricted(t *testing.T, who string, sc *v1.SecurityContext, add []v1.Capability) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s: no securityContext", who)
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", who)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: privilege escalation allowed", who)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem writable", who)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != v1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccomp profile %v, want RuntimeDefault", who, sc.SeccompProfile)
	}
	if sc.Capabilities == nil || !cmp.Equal([]v1.Capability{"ALL"}, sc.Capabilities.Drop) {
		t.Errorf("%s: capabilities %v, want ALL dropped", who, sc.Capabilities)
	} else if !cmp.Equal(add, sc.Capabilities.Add) {
		t.Errorf("%s: adds capabilities %v, want %v", who, sc.Capabilities.Add, add)
	}
}

func nonHostPath(vs []v1.Volume) []v1.Volume {
	var out []v1.Volume
	for _, v := range vs {
		if v.HostPath == nil {
			out = append(out, v)
		}
	}
	return out
}
