//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestVGPUMPSMode: a node whose agent configuration puts its cards in the
// mps operating mode registers them so; a pod asking for
// volcano.sh/vgpu-mode: mps is scheduled there, and the agent's Allocate
// answer (as the fake kubelet recorded it) points the container at the
// node's MPS control daemon with its shares as MPS client limits, and
// injects no libvgpu.
func TestVGPUMPSMode(t *testing.T) {
	const ns, node = "vgpu-mps", "mps-node"
	ctx := setup(t, ns, 3*time.Minute)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "device-config.yaml")
	if err := os.WriteFile(cfg, []byte("nodeconfig:\n- name: "+node+"\n  operatingmode: mps\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "mps")
	if _, err := cluster.AddGPUNodeWith(ctx, node, "dgxa100", framework.AgentSpec{Args: []string{"--config-file=" + cfg, "--mps-root=" + root}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.RemoveNode(context.Background(), node); err != nil {
			t.Errorf("remove node %s: %v", node, err)
		}
	})
	err := cluster.Poll(ctx, 30*time.Second, "node "+node+" to register its cards in mps mode", func(ctx context.Context) (bool, error) {
		n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cards, err := vgpuproto.DecodeRegister(n.Annotations[vgpuproto.AnnotationRegister])
		return err == nil && len(cards) > 0 && !slices.ContainsFunc(cards, func(c vgpuproto.Card) bool { return c.Mode != vgpuproto.ModeMPS }), err
	})
	if err != nil {
		t.Fatal(err)
	}

	job := framework.VGPUJob(ns, "mps", framework.VGPUTask{Name: "worker", Replicas: 1, VGPUs: 1, MemoryMiB: 3000, Cores: 25,
		Annotations: map[string]string{vgpuproto.AnnotationMode: vgpuproto.ModeMPS}})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
	if err := cluster.WaitJobRunning(ctx, ns, job.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil || len(pods) != 1 {
		t.Fatalf("job pods: %d, %v; want 1", len(pods), err)
	}
	pod := pods[0]
	if pod.Spec.NodeName != node {
		t.Fatalf("pod %s asking for %s=%s bound to %s, want the MPS node %s", pod.Name, vgpuproto.AnnotationMode, vgpuproto.ModeMPS, pod.Spec.NodeName, node)
	}
	card := strings.SplitN(pod.Annotations[vgpuproto.AnnotationIDs], ",", 2)[0]
	alloc := waitAllocation(ctx, t, cluster.Node(node), pod)
	c := alloc.Containers[0]
	t.Logf("pod %s on %s: Allocate env %v, mounts %v", pod.Name, node, c.Envs, c.Mounts)
	want := map[string]string{
		"NVIDIA_VISIBLE_DEVICES":            card,
		"CUDA_MPS_PIPE_DIRECTORY":           "/tmp/nvidia-mps",
		"CUDA_MPS_LOG_DIRECTORY":            "/var/log/nvidia-mps",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=3000M",
	}
	for k, v := range want {
		if got := c.Envs[k]; got != v {
			t.Errorf("Allocate env %s=%q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"CUDA_DEVICE_MEMORY_LIMIT_0", "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY_SHARED_CACHE"} {
		if v, ok := c.Envs[k]; ok {
			t.Errorf("Allocate env %s=%q on an MPS card; want no libvgpu limits", k, v)
		}
	}
	wantMounts := []string{
		filepath.Join(root, "pipe") + ":/tmp/nvidia-mps",
		filepath.Join(root, "log") + ":/var/log/nvidia-mps",
		filepath.Join(root, "shm") + ":/dev/shm",
	}
	if !slices.Equal(c.Mounts, wantMounts) {
		t.Errorf("Allocate mounts %v, want the MPS daemon's directories %v and no libvgpu", c.Mounts, wantMounts)
	}
	checkPreferred(t, pod.Name, c, card)
}
