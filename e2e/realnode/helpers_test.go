//go:build e2e

package realnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/images"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// setup returns a context bounded by timeout and a fresh namespace (with
// its default ServiceAccount); on failure the children's log tails are
// printed.
func setup(t *testing.T, namespace string, timeout time.Duration) context.Context {
	t.Helper()
	return rc.Setup(t, namespace, timeout)
}

// task is a one-container task on the real node running the CUDA workload
// image (e2e/testdata/gpuworkload.c) with args, asking for vgpus cards of
// memMiB and cores each (0 leaves a resource out). Its requests are small:
// the node has 2 CPUs.
func task(name string, vgpus, memMiB, cores int64, args ...string) framework.VGPUTask {
	return framework.VGPUTask{Name: name, Replicas: 1, VGPUs: vgpus, MemoryMiB: memMiB, Cores: cores,
		Image: rc.Images[images.CUDAWorkload].Reference, Args: args, CPU: "20m", Memory: "16Mi"}
}

// onCard pins a task to a card by UUID.
func onCard(t framework.VGPUTask, uuid string) framework.VGPUTask {
	t.Annotations = map[string]string{vgpuproto.AnnotationUseUUID: uuid}
	return t
}

// runJob creates the Job, waits until its pods run and returns them by
// task name.
func runJob(ctx context.Context, t *testing.T, ns, name string, tasks ...framework.VGPUTask) map[string]v1.Pod {
	t.Helper()
	return rc.RunJob(ctx, t, framework.VGPUJob(ns, name, tasks...))
}

// logValue waits until the pod's container printed key=value in its log
// (read through the API server from the kubelet) and returns value; a
// container that ended first fails the test with its log.
func logValue(ctx context.Context, t *testing.T, pod v1.Pod, key string) string {
	t.Helper()
	var log string
	err := rc.Poll(ctx, time.Minute, fmt.Sprintf("%s in pod %s's log", key, pod.Name), func(ctx context.Context) (bool, error) {
		b, err := rc.Kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		log = string(b)
		for _, line := range strings.Split(log, "\n") {
			if _, ok := strings.CutPrefix(line, key+"="); ok {
				return true, nil
			}
		}
		p, err := rc.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) {
			return false, fmt.Errorf("pod %s ended (%s) before printing %s; log:\n%s", pod.Name, p.Status.Phase, key, log)
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	return ""
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

// containerID is the runtime's ID of the pod's only container, as the
// kubelet reports it (containerd://<id>).
func containerID(ctx context.Context, t *testing.T, pod v1.Pod) string {
	t.Helper()
	p, err := rc.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("pod %s: no container ID in %+v", pod.Name, p.Status.ContainerStatuses)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	return id
}

// cardOf is the index (in the driver's order) of the one card the pod's
// allocation names.
func cardOf(t *testing.T, pod v1.Pod) int {
	t.Helper()
	alloc, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	if err != nil || len(alloc) != 1 || len(alloc[0]) != 1 {
		t.Fatalf("pod %s: allocation %q: want one container on one card (%v)", pod.Name, pod.Annotations[vgpuproto.AnnotationIDs], err)
	}
	for i, d := range rc.Driver.Stats().Devices {
		if d.UUID == alloc[0][0].UUID {
			return i
		}
	}
	t.Fatalf("pod %s: card %s is not the driver's", pod.Name, alloc[0][0].UUID)
	return -1
}

// withoutAdmission creates the namespace labelled
// vshare.io/admission=disabled, which the chart's webhooks skip; setup then
// finds it.
func withoutAdmission(t *testing.T, ns string) {
	t.Helper()
	_, err := rc.Kube.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"vshare.io/admission": "disabled"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
