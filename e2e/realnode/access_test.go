//go:build e2e

package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/images"
)

// TestWhatAContainerReaches: which cards a container reaches on the real
// node, without the admission webhook, when it asks for no share, when it
// opts out of libvgpu, and when it holds whole cards; each as the fake
// driver and the container's own CUDA and NVML see it.
func TestWhatAContainerReaches(t *testing.T) {
	// A namespace the admission webhook skips (vshare.io/admission=
	// disabled): what the node alone gives. TestAdmission shows the same
	// pods in a namespace the webhook covers.
	const ns = "access"
	withoutAdmission(t, ns)
	ctx := setup(t, ns, 6*time.Minute)

	// The CUDA workload image sets NVIDIA_VISIBLE_DEVICES=all, as NVIDIA's
	// CUDA base images do. The toolkit gives such a container every card,
	// with no limit: nothing on the node asks the scheduler. The webhook's
	// overwriteEnv closes it (TestAdmission); without it, this is the gap.
	t.Run("without the webhook, a pod asking for no GPU, in a CUDA image, reaches every card", func(t *testing.T) {
		pod := plainPod(ctx, t, ns, "cuda-image", nil)
		if got := logValue(ctx, t, pod, "cuda_devices"); got != "2" {
			t.Errorf("CUDA devices %s, want both cards (the toolkit honours the image's NVIDIA_VISIBLE_DEVICES=all)", got)
		}
		if got := logValue(ctx, t, pod, "cuda_device_0_mib"); got != "40960" {
			t.Errorf("card 0 memory %s MiB, want the whole card 40960 (no libvgpu, no limit)", got)
		}
	})
	t.Run("a pod with NVIDIA_VISIBLE_DEVICES=void reaches no driver", func(t *testing.T) {
		pod := plainPod(ctx, t, ns, "void", []v1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"}})
		if got := logValue(ctx, t, pod, "error"); !strings.Contains(got, "cannot open shared object file") {
			t.Errorf("error %q, want the driver's libraries not found (the toolkit gives a void container nothing)", got)
		}
	})
	t.Run("a pod with NVIDIA_VISIBLE_DEVICES=none has the libraries and no card", func(t *testing.T) {
		pod := plainPod(ctx, t, ns, "none", []v1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "none"}})
		if got := logValue(ctx, t, pod, "cuda_devices"); got != "0" {
			t.Errorf("CUDA devices %s, want 0", got)
		}
	})
	t.Run("without the webhook, CUDA_DISABLE_CONTROL=true gets its card without libvgpu's limit", func(t *testing.T) {
		card := rc.Driver.Stats().Devices[0].UUID
		tk := onCard(task("free", 1, 2000, 0, "fill", "1024"), card)
		tk.Env = []v1.EnvVar{{Name: "CUDA_DISABLE_CONTROL", Value: "true"}}
		pods := runJob(ctx, t, ns, "nocontrol", tk)
		pod := pods["free"]
		got := atoi(t, logValue(ctx, t, pod, "allocated_mib"))
		id := containerID(ctx, t, pod)
		peak := rc.Driver.GroupPeak(0, id)
		t.Logf("CUDA_DISABLE_CONTROL container asked 2000 MiB, allocated %d MiB, driver peak %d MiB", got, peak>>20)
		if got <= 2000 || peak <= 2000<<20 {
			t.Errorf("allocated %d MiB (driver peak %d MiB), want more than its 2000 MiB share: no libvgpu, as documented", got, peak>>20)
		}
	})
	t.Run("a pod holding both cards whole has them alone", func(t *testing.T) {
		pods := runJob(ctx, t, ns, "whole", task("whole", 2, 0, 0, "devices"))
		pod := pods["whole"]
		if got := logValue(ctx, t, pod, "cuda_devices"); got != "2" {
			t.Errorf("CUDA devices %s, want 2", got)
		}
		for _, key := range []string{"cuda_device_0_mib", "cuda_device_1_mib"} {
			if got := logValue(ctx, t, pod, key); got != "40960" {
				t.Errorf("%s = %s, want the whole card 40960", key, got)
			}
		}
		job := framework.VGPUJob(ns, "waits", task("small", 1, 1000, 10, "devices"))
		if err := rc.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.DeleteJob(context.Background(), ns, "waits") })
		// A vGPU pod beside whole cards waits; the scheduler says why.
		err := rc.Poll(ctx, time.Minute, "the small Job Unschedulable with a vGPU reason", func(ctx context.Context) (bool, error) {
			pg, podMsg := rc.UnschedulableMessages(ctx, ns, "waits")
			return strings.Contains(pg, "vGPU"), fmt.Errorf("podgroup %q, pod %q", pg, podMsg)
		})
		if err != nil {
			t.Error(err)
		}
	})
}

// plainPod runs the CUDA workload image's "devices" mode in a pod of the
// default scheduler that asks for no GPU, with env added, and returns it
// once it runs.
func plainPod(ctx context.Context, t *testing.T, ns, name string, env []v1.EnvVar) v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name: "cuda", Image: rc.Images[images.CUDAWorkload].Reference, Args: []string{"devices"}, Env: env,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("20m"), v1.ResourceMemory: resource.MustParse("16Mi")}},
			}},
		},
	}
	created, err := rc.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rc.Kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return *created
}
