//go:build e2e

package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/images"
)

// realJob is the Job the demo runs on the real node: one pod holding 8000
// MiB and 30 % of a card, filling its memory in 256 MiB pieces until
// libvgpu refuses, then holding it.
const realJob = "real-gpu"

// onRealNode keeps the sample Jobs on the simulated nodes (their image
// exists nowhere; the real node would try to pull it) and adds realJob,
// pinned to the real node, running the CUDA workload image built here.
func onRealNode(rc *framework.RealCluster, jobs []*batchJob) []*batchJob {
	for _, j := range jobs {
		for i := range j.tasks {
			j.tasks[i].NodeSelector = map[string]string{"type": "kwok"}
		}
	}
	return append(jobs, &batchJob{realJob, []framework.VGPUTask{{
		Name: "cuda", Replicas: 1, VGPUs: 1, MemoryMiB: 8000, Cores: 30,
		Image: rc.Images[images.CUDAWorkload].Reference, Args: []string{"fill", "256"},
		CPU: "20m", Memory: "16Mi",
		NodeSelector: map[string]string{"kubernetes.io/hostname": rc.Node.Name},
	}}})
}

// printRealNode shows the real pod's view and the driver's: what the
// container allocated before libvgpu refused, and what the fake driver
// handed it.
func printRealNode(ctx context.Context, rc *framework.RealCluster, o Options) error {
	pods, err := rc.JobPods(ctx, namespace, realJob)
	if err != nil || len(pods) != 1 {
		return fmt.Errorf("job %s: %d pods (%v)", realJob, len(pods), err)
	}
	pod := pods[0]
	var log string
	err = rc.Poll(ctx, 30*time.Second, "the real pod's allocation", func(ctx context.Context) (bool, error) {
		b, err := rc.Kube.CoreV1().Pods(namespace).GetLogs(pod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
		log = string(b)
		return err == nil && strings.Contains(log, "refused="), err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\nOn the real node %s (kubelet %s with containerd, the chart's agent on its NVML path):\n", rc.Node.Name, framework.KubeVersion)
	fmt.Fprintf(o.Out, "$ kubectl logs -n %s %s\n%s", namespace, pod.Name, log)
	st := rc.Driver.Stats()
	for i, d := range st.Devices {
		fmt.Fprintf(o.Out, "fake driver, card %d (%s): %d MiB in use of %d\n", i, d.UUID, d.UsedBytes>>20, d.TotalBytes>>20)
	}
	return nil
}
