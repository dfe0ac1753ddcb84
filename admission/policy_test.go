package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func newPolicy(t *testing.T, edit func(*config.Config)) *Policy {
	t.Helper()
	cfg := config.Default()
	if edit != nil {
		edit(cfg)
	}
	p, err := NewPolicy(Options{
		Args:           pluginargs.Args{VGPUEnable: true},
		Config:         func() (*config.Config, uint64) { return cfg, 1 },
		SchedulerName:  DefaultSchedulerName,
		AgentHostPaths: []string{"/usr/local/vgpu", "/var/lib/vshare/vgpu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func vgpuContainer(name string, n, mem int64) v1.Container {
	rl := v1.ResourceList{vgpuproto.ResourceNumber: *resource.NewQuantity(n, resource.DecimalSI)}
	if mem != 0 {
		rl[vgpuproto.ResourceMemory] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	return v1.Container{Name: name, Image: "cuda", Resources: v1.ResourceRequirements{Limits: rl}}
}

func plain(name string, env ...v1.EnvVar) v1.Container {
	return v1.Container{Name: name, Image: "cuda", Env: env}
}

func pod(cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team"},
		Spec: v1.PodSpec{SchedulerName: v1.DefaultSchedulerName, Containers: cs}}
}

func paths(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Op+" "+c.Path)
	}
	return out
}

func TestMutate(t *testing.T) {
	overwrite := func(c *config.Config) { c.NVIDIA.OverwriteEnv = true }
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		pod  *v1.Pod
		want []string
	}{
		{"no share, overwriteEnv off: untouched", nil, pod(plain("a")), nil},
		{"a share names no scheduler: volcano", nil, pod(vgpuContainer("a", 1, 1000)), []string{"add /spec/schedulerName"}},
		{"no share, overwriteEnv on: hidden", overwrite, pod(plain("a", v1.EnvVar{Name: EnvNVIDIAVisible, Value: "all"})),
			[]string{"add /spec/containers/0/env"}},
		{"beside a share, only the container without one is hidden", overwrite,
			pod(vgpuContainer("gpu", 1, 1000), plain("sidecar")), []string{"add /spec/schedulerName", "add /spec/containers/1/env"}},
		{"another plugin's GPUs are left to it", overwrite, pod(v1.Container{Name: "a", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}), nil},
		{"runtime class for a share", func(c *config.Config) { c.NVIDIA.RuntimeClassName = "nvidia" },
			pod(vgpuContainer("a", 1, 1000)), []string{"add /spec/schedulerName", "add /spec/runtimeClassName"}},
		{"already none: untouched", overwrite, pod(plain("a", v1.EnvVar{Name: EnvNVIDIAVisible, Value: "none"})), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newPolicy(t, tc.edit).Mutate(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(paths(got), tc.want) {
				t.Errorf("changes %q, want %q", paths(got), tc.want)
			}
		})
	}
}

func TestSetEnvReplacesEveryEntry(t *testing.T) {
	env, changed := setEnv([]v1.EnvVar{{Name: "A", Value: "1"}, {Name: EnvNVIDIAVisible, Value: "all"}, {Name: EnvNVIDIAVisible, Value: "0"}}, EnvNVIDIAVisible, "none")
	want := []v1.EnvVar{{Name: "A", Value: "1"}, {Name: EnvNVIDIAVisible, Value: "none"}}
	if !changed || !slices.Equal(env, want) {
		t.Errorf("setEnv = %v, %t; want %v, true", env, changed, want)
	}
}

func TestValidate(t *testing.T) {
	priv := vgpuContainer("a", 1, 1000)
	priv.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	disabled := vgpuContainer("a", 1, 1000)
	disabled.Env = []v1.EnvVar{{Name: vgpuproto.EnvDisableControl, Value: "true"}}
	over := vgpuContainer("a", 1, 1000)
	over.VolumeMounts = []v1.VolumeMount{{Name: "x", MountPath: "/etc/ld.so.preload"}}
	under := vgpuContainer("a", 1, 1000)
	under.VolumeMounts = []v1.VolumeMount{{Name: "x", MountPath: "/tmp"}}
	hostPID := pod(vgpuContainer("a", 1, 1000))
	hostPID.Spec.HostPID = true
	hostPath := pod(plain("a"))
	hostPath.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/lib"}}}}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string // a substring of the one refusal; "" for none
	}{
		{"a plain share", pod(vgpuContainer("a", 1, 1000)), ""},
		{"a bad value, with the scheduler's message", pod(vgpuContainer("a", 1, -5)), "spec: hamivgpu: "},
		{"privileged with a share", pod(priv), "spec.containers[0].securityContext.privileged: "},
		{"privileged without a share is not ours to refuse", func() *v1.Pod {
			c := plain("a")
			c.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
			return pod(c)
		}(), ""},
		{"CUDA_DISABLE_CONTROL with a share", pod(disabled), "spec.containers[0].env[0]: "},
		{"a mount over the preload file", pod(over), "spec.containers[0].volumeMounts[0].mountPath: "},
		{"a mount above the agent's paths (runtimes mount deeper paths later)", pod(under), ""},
		{"hostPID with a share", hostPID, "spec.hostPID: "},
		{"hostPath above the agent's directory", hostPath, "spec.volumes[0].hostPath.path: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := newPolicy(t, nil).Validate(tc.pod, "spec")
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("refused: %v", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0].Error(), tc.want)):
				t.Errorf("refusals %v, want one starting %q", got, tc.want)
			}
		})
	}
}

// review posts an AdmissionReview to the handler as the API server does.
func review(t *testing.T, h http.Handler, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%s: HTTP %d %s", path, w.Code, w.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("%s: %v %s", path, err, w.Body)
	}
	if out.Response.UID != req.UID {
		t.Errorf("response UID %q, want %q", out.Response.UID, req.UID)
	}
	return out.Response
}

func TestHandlerPatchesAndRefuses(t *testing.T) {
	h := &Handler{Policy: newPolicy(t, func(c *config.Config) { c.NVIDIA.OverwriteEnv = true })}
	p := pod(plain("a", v1.EnvVar{Name: EnvNVIDIAVisible, Value: "all"}))
	raw, _ := json.Marshal(p)
	resp := review(t, h, "/mutate", &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: podResource, Object: runtime.RawExtension{Raw: raw}})
	if !resp.Allowed || resp.PatchType == nil || !strings.Contains(string(resp.Patch), `"value":[{"name":"NVIDIA_VISIBLE_DEVICES","value":"none"}]`) {
		t.Errorf("mutate: allowed %t, patch %s", resp.Allowed, resp.Patch)
	}

	bad := vgpuContainer("a", 1, -5)
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{bad}}}}}
	raw, _ = json.Marshal(d)
	resp = review(t, h, "/validate", &admissionv1.AdmissionRequest{UID: "2", Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Object: runtime.RawExtension{Raw: raw}})
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "spec.template.spec: hamivgpu: ") {
		t.Errorf("validate Deployment: allowed %t, result %+v", resp.Allowed, resp.Result)
	}
}

// TestMutateAscendPerEntry: the per-entry overwriteEnv and runtimeClassName
// of older HAMi vnpus documents are acted on, not only the section's.
func TestMutateAscendPerEntry(t *testing.T) {
	cfg := config.Default()
	if len(cfg.VNPUs.Configs) == 0 {
		t.Fatal("no built-in vnpus entry")
	}
	e := &cfg.VNPUs.Configs[0]
	e.OverwriteEnv, e.RuntimeClassName = true, "ascend"
	p, err := NewPolicy(Options{Args: pluginargs.Args{AscendHAMiVNPUEnable: true},
		Config: func() (*config.Config, uint64) { return cfg, 1 }, SchedulerName: DefaultSchedulerName})
	if err != nil {
		t.Fatal(err)
	}
	npu := v1.Container{Name: "npu", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		v1.ResourceName(e.ResourceName): resource.MustParse("1")}}}
	got, err := p.Mutate(pod(npu, plain("sidecar")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"add /spec/schedulerName", "add /spec/runtimeClassName", "add /spec/containers/1/env"}
	if !slices.Equal(paths(got), want) {
		t.Fatalf("changes %q, want %q", paths(got), want)
	}
	if env := got[2].Value.([]v1.EnvVar); len(env) != 1 || env[0] != (v1.EnvVar{Name: EnvAscendVisible, Value: "none"}) {
		t.Errorf("sidecar env %v, want ASCEND_VISIBLE_DEVICES=none", env)
	}
	if got[1].Value != "ascend" {
		t.Errorf("runtime class %v, want the entry's", got[1].Value)
	}
}

// TestValidateVolcanoJobTasks: each task's template of a Volcano Job is
// checked, and the refusal names the task.
func TestValidateVolcanoJobTasks(t *testing.T) {
	h := &Handler{Policy: newPolicy(t, nil)}
	priv := vgpuContainer("a", 1, 1000)
	priv.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	job := map[string]any{
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": map[string]any{"name": "j"},
		"spec": map[string]any{"tasks": []any{
			map[string]any{"name": "ok", "template": v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{vgpuContainer("a", 1, 1000)}}}},
			map[string]any{"name": "bad", "template": v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{priv}}}},
		}},
	}
	raw, _ := json.Marshal(job)
	resp := review(t, h, "/validate", &admissionv1.AdmissionRequest{UID: "3", Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"}, Object: runtime.RawExtension{Raw: raw}})
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "spec.tasks[1].template.spec.containers[0].securityContext.privileged") ||
		strings.Contains(resp.Result.Message, "spec.tasks[0]") {
		t.Errorf("validate Volcano Job: allowed %t, result %+v", resp.Allowed, resp.Result)
	}
}
