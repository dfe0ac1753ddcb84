//go:build e2e

package realnode

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestInitContainersAndSidecarsOnRealKubelet runs the init container cases
// (framework.InitContainerCases: vGPU init containers and native sidecars
// beside app containers) on the real kubelet: what the kubelet allocated
// each container, read from its own device checkpoint (device IDs and the
// agent's Allocate answer it kept), matches what the scheduler accounted
// (the pod's allocation, and per card as many of the pod's device IDs as
// it charges holders), and each container's CUDA reports its own limit.
func TestInitContainersAndSidecarsOnRealKubelet(t *testing.T) {
	const ns = "init-containers"
	ctx := setup(t, ns, 6*time.Minute)
	card := rc.Driver.Stats().Devices[1].UUID
	for _, c := range framework.InitContainerCases() {
		t.Run(c.Name, func(t *testing.T) {
			base := task("w", 0, 0, 0, "devices")
			base.Annotations = map[string]string{vgpuproto.AnnotationUseUUID: card}
			job := framework.VGPUContainersJob(ns, c.Name, base, c.Containers)
			spec := &job.Spec.Tasks[0].Template.Spec
			for i := range spec.InitContainers {
				if spec.InitContainers[i].RestartPolicy == nil {
					spec.InitContainers[i].Args = []string{"devices", "once"}
				}
			}
			if err := rc.CreateJob(ctx, job); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rc.DeleteJob(context.Background(), ns, c.Name) })
			if err := rc.WaitJobRunning(ctx, ns, c.Name, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			pods, err := rc.JobPods(ctx, ns, c.Name)
			if err != nil || len(pods) != 1 {
				t.Fatalf("job %s: %d pods (%v)", c.Name, len(pods), err)
			}
			pod := pods[0]
			alloc := checkpointAllocation(t, pod)
			for _, ca := range alloc.Containers {
				t.Logf("  %s (init %v, sidecar %v): device IDs %v, NVIDIA_VISIBLE_DEVICES=%s CUDA_DEVICE_MEMORY_LIMIT_0=%s CUDA_DEVICE_SM_LIMIT=%s",
					ca.Container, ca.Init, ca.Sidecar, ca.DeviceIDs, ca.Envs["NVIDIA_VISIBLE_DEVICES"],
					ca.Envs["CUDA_DEVICE_MEMORY_LIMIT_0"], ca.Envs["CUDA_DEVICE_SM_LIMIT"])
			}
			if diffs := framework.CheckContainerAnswers(&pod, alloc); len(diffs) > 0 {
				t.Errorf("the real kubelet's allocations against the scheduler's: %s", strings.Join(diffs, "; "))
			}
			for _, ctr := range c.Containers {
				got := containerLogValue(ctx, t, pod, ctr.Name, "cuda_device_0_mib")
				if got != strconv.FormatInt(ctr.MemoryMiB, 10) {
					t.Errorf("container %s: CUDA reports %s MiB, want its own limit %d", ctr.Name, got, ctr.MemoryMiB)
				}
			}
		})
	}
}

// checkpointAllocation is what the real kubelet allocated each container
// of the pod, from its device manager checkpoint, in the order it admits
// containers (init containers, then app containers: the order the
// kubelet comparison test shows).
func checkpointAllocation(t *testing.T, pod v1.Pod) framework.PodAllocation {
	t.Helper()
	entries, err := framework.DeviceCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]framework.CheckpointEntry{}
	for _, e := range entries {
		if e.PodUID == string(pod.UID) && e.ResourceName == vgpuproto.ResourceNumber {
			byName[e.ContainerName] = e
		}
	}
	alloc := framework.PodAllocation{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	reusable := map[string]bool{}
	add := func(c v1.Container, init bool) {
		e, ok := byName[c.Name]
		if !ok {
			return
		}
		var resp pluginapi.ContainerAllocateResponse
		if err := resp.Unmarshal(e.AllocResp); err != nil {
			t.Fatalf("container %s: the checkpoint's Allocate answer: %v", c.Name, err)
		}
		ca := framework.ContainerAllocation{Container: c.Name, Envs: resp.Envs, Init: init,
			Sidecar: init && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways}
		for _, ids := range e.DeviceIDs {
			ca.DeviceIDs = append(ca.DeviceIDs, ids...)
		}
		slices.Sort(ca.DeviceIDs)
		for _, id := range ca.DeviceIDs {
			if reusable[id] {
				ca.Reused = append(ca.Reused, id)
			}
			reusable[id] = init && !ca.Sidecar
		}
		alloc.Containers = append(alloc.Containers, ca)
	}
	for _, c := range pod.Spec.InitContainers {
		add(c, true)
	}
	for _, c := range pod.Spec.Containers {
		add(c, false)
	}
	if len(alloc.Containers) == 0 {
		t.Fatalf("pod %s: nothing of %s in the kubelet's checkpoint", pod.Name, vgpuproto.ResourceNumber)
	}
	return alloc
}

// containerLogValue is logValue for one named container of the pod, which
// may have ended (an init container).
func containerLogValue(ctx context.Context, t *testing.T, pod v1.Pod, container, key string) string {
	t.Helper()
	var val string
	err := rc.Poll(ctx, time.Minute, fmt.Sprintf("%s in %s/%s's log", key, pod.Name, container), func(ctx context.Context) (bool, error) {
		b, err := rc.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &v1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, key+"="); ok {
				val = v
				return true, nil
			}
		}
		return false, fmt.Errorf("log so far:\n%s", b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return val
}
