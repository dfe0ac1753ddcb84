//go:build e2e

package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/images"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestAdmission: the chart's webhook, called by the API server over TLS
// with the certificate the webhook issued itself, closes each way around a
// share as a tenant would try it, in a namespace it covers; the same pods
// in a namespace it skips get around it (TestWhatAContainerReaches). Last,
// with the webhook down, the tenant's pods are refused and the control
// plane's are not.
func TestAdmission(t *testing.T) {
	const ns = "admission"
	ctx := setup(t, ns, 6*time.Minute)
	pods := rc.Kube.CoreV1().Pods(ns)

	t.Run("a pod asking for no GPU, in a CUDA image, reaches no card", func(t *testing.T) {
		pod := plainPod(ctx, t, ns, "cuda-image", nil)
		if got := logValue(ctx, t, pod, "cuda_devices"); got != "0" {
			t.Errorf("CUDA devices %s, want 0: overwriteEnv hides the cards from a container that asks for none", got)
		}
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if env := got.Spec.Containers[0].Env; len(env) != 1 || env[0] != (v1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "none"}) {
			t.Errorf("the pod's environment is %v, want the webhook's NVIDIA_VISIBLE_DEVICES=none", env)
		}
	})

	t.Run("an image's NVIDIA_VISIBLE_DEVICES=all in the pod spec too", func(t *testing.T) {
		pod := plainPod(ctx, t, ns, "asks-all", []v1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}})
		if got := logValue(ctx, t, pod, "cuda_devices"); got != "0" {
			t.Errorf("CUDA devices %s, want 0", got)
		}
	})

	// Each of these is refused when created, with the field and the reason.
	share := func(name string) v1.Container {
		return v1.Container{Name: name, Image: rc.Images[images.CUDAWorkload].Reference, Args: []string{"devices"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				framework.VGPUNumber:     resource.MustParse("1"),
				vgpuproto.ResourceMemory: resource.MustParse("2000"),
				v1.ResourceCPU:           resource.MustParse("20m"),
				v1.ResourceMemory:        resource.MustParse("16Mi"),
			}}}
	}
	refused := map[string]struct {
		edit func(*v1.Pod)
		want string
	}{
		"privileged with a share": {func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
		}, "spec.containers[0].securityContext.privileged"},
		"hostPID with a share": {func(p *v1.Pod) { p.Spec.HostPID = true }, "spec.hostPID"},
		"CUDA_DISABLE_CONTROL with a share": {func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CUDA_DISABLE_CONTROL", Value: "true"}}
		}, "spec.containers[0].env[0]"},
		"a mount over /etc/ld.so.preload": {func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "empty", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "empty", MountPath: "/etc/ld.so.preload", SubPath: "x"}}
		}, "spec.containers[0].volumeMounts[0].mountPath"},
		"a hostPath over the agent's regions, without a share": {func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
			p.Spec.Volumes = []v1.Volume{{Name: "regions", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: rc.CacheDir}}}}
		}, "spec.volumes[0].hostPath.path"},
		"a share over 100 % of the SMs": {func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[vgpuproto.ResourceCores] = resource.MustParse("150")
		}, "volcano.sh/vgpu-cores"},
	}
	for name, tc := range refused {
		t.Run("refused: "+name, func(t *testing.T) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns},
				Spec: v1.PodSpec{SchedulerName: "volcano", RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{share("cuda")}}}
			tc.edit(p)
			_, err := pods.Create(ctx, p, metav1.CreateOptions{})
			if err == nil {
				_ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{})
				t.Fatalf("created; want refused at %s", tc.want)
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), "vshare admission") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused with %q, want the webhook naming %s", err, tc.want)
			}
		})
	}

	t.Run("a Deployment asking for a share, naming no scheduler, runs on its share", func(t *testing.T) {
		d := deployment(ns, "plain", share("cuda"))
		if _, err := rc.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rc.Kube.AppsV1().Deployments(ns).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
		})
		var pod v1.Pod
		err := rc.Poll(ctx, 2*time.Minute, "the Deployment's pod running", func(ctx context.Context) (bool, error) {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=plain"})
			if err != nil || len(l.Items) == 0 {
				return false, err
			}
			pod = l.Items[0]
			return pod.Status.Phase == v1.PodRunning || pod.Status.Phase == v1.PodSucceeded, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.SchedulerName != "volcano" {
			t.Errorf("schedulerName %q, want volcano from the webhook", pod.Spec.SchedulerName)
		}
		if got := logValue(ctx, t, pod, "cuda_device_0_mib"); got != "2000" {
			t.Errorf("the pod's card shows %s MiB, want its 2000 MiB share", got)
		}
	})

	t.Run("a Deployment with a bad request is refused at creation, with the scheduler's message", func(t *testing.T) {
		c := share("cuda")
		c.Resources.Limits[vgpuproto.ResourceCores] = resource.MustParse("150")
		_, err := rc.Kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "bad", c), metav1.CreateOptions{})
		if err == nil {
			_ = rc.Kube.AppsV1().Deployments(ns).Delete(context.Background(), "bad", metav1.DeleteOptions{})
			t.Fatal("created")
		}
		if !strings.Contains(err.Error(), "spec.template.spec: hamivgpu: ") || !strings.Contains(err.Error(), "vgpu-cores") {
			t.Errorf("refused with %q, want the scheduler's message for spec.template.spec", err)
		}
	})

	t.Run("with the webhook down, the tenant's pods are refused and the control plane's are not", func(t *testing.T) {
		scale(ctx, t, 0)
		t.Cleanup(func() { scale(context.Background(), t, 1) })
		err := rc.Poll(ctx, time.Minute, "a tenant pod refused", func(ctx context.Context) (bool, error) {
			_, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-down", Namespace: ns},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: rc.Images[images.Pause].Reference}}}}, metav1.CreateOptions{})
			if err == nil {
				_ = pods.Delete(ctx, "while-down", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				return false, nil // an endpoint still answered
			}
			return strings.Contains(err.Error(), "failed calling webhook"), err
		})
		if err != nil {
			t.Fatal(err)
		}
		sys := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "while-webhook-down", Namespace: framework.ChartNamespace},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: rc.Images[images.Pause].Reference}}}}
		if _, err := rc.Kube.CoreV1().Pods(framework.ChartNamespace).Create(ctx, sys, metav1.CreateOptions{}); err != nil {
			t.Errorf("a pod in the release's namespace while the webhook is down: %v", err)
		} else {
			_ = rc.Kube.CoreV1().Pods(framework.ChartNamespace).Delete(context.Background(), sys.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	})
}

func deployment(ns, name string, c v1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}}}
}

// scale sets the webhook Deployment's replicas and waits until that many
// are ready.
func scale(ctx context.Context, t *testing.T, n int32) {
	t.Helper()
	ds := rc.Kube.AppsV1().Deployments(framework.ChartNamespace)
	s, err := ds.GetScale(ctx, "vshare-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := ds.UpdateScale(ctx, "vshare-webhook", s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = rc.Poll(ctx, 2*time.Minute, "the webhook's ready replicas", func(ctx context.Context) (bool, error) {
		d, err := ds.Get(ctx, "vshare-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas == n && d.Status.Replicas == n, nil
	})
	if err != nil {
		t.Error(err)
	}
	if n == 0 || err != nil {
		return
	}
	// A ready replica is not yet a webhook the API server reaches: the
	// Service's endpoints and kube-proxy's rules follow the readiness, and
	// the next test's pods were refused with "connection refused" in that
	// window. Wait until a (dry-run) pod in a namespace the webhook serves
	// gets past it.
	probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Namespace: metav1.NamespaceDefault},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: rc.Images[images.Pause].Reference}}}}
	err = rc.Poll(ctx, 2*time.Minute, "the webhook answering the API server", func(ctx context.Context) (bool, error) {
		_, err := rc.Kube.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Error(err)
	}
}
