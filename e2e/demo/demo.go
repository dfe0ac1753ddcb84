//go:build e2e

// Package demo brings the local control plane up with simulated DGX A100
// nodes and a simulated Ascend 910B node, submits Volcano Jobs that share
// GPUs and NPUs, and prints who holds what on each card through the kubectl
// plugin (`kubectl vshare cards`, `pods`, `fit`). It is what `make demo` runs.
package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/kubectlvshare"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// schedulerConf enables vGPU and HAMi Ascend vNPU sharing.
const schedulerConf = `actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.AscendHAMiVNPUEnable: true
`

// npuChip is the simulated Ascend node's chip type (a vnpus entry of the
// built-in catalogue).
const npuChip = "Ascend910B3"

// Options configure Run.
type Options struct {
	// Nodes is the number of simulated DGX A100 nodes (8 x A100-40GB each).
	Nodes int
	// Keep leaves the cluster running after the table until ctx ends.
	Keep bool
	// WorkDir is the harness's work directory; empty means a temporary one.
	WorkDir string
	// RealNode adds a real node beside the simulated ones
	// (framework.StartRealCluster: the kubelet with containerd, the chart
	// installed from images built here, a fake GPU driver behind the
	// node's device nodes) and runs one Job holding a share of its card.
	// Needs root and Debian's containerd (docs/install.md).
	RealNode bool
	// Out receives the report; Log the progress lines.
	Out, Log io.Writer
}

// namespace holds the demo's Jobs.
const namespace = "demo"

// jobs are the sample workloads: inference replicas packed on shared cards,
// a training gang, notebooks, and a two-card job.
func jobs() []*batchJob {
	return []*batchJob{
		{"llm-inference", []framework.VGPUTask{{Name: "server", Replicas: 3, VGPUs: 1, MemoryMiB: 12000, Cores: 40}}},
		{"train-gang", []framework.VGPUTask{
			{Name: "ps", Replicas: 1, VGPUs: 1, MemoryMiB: 4000, Cores: 20},
			{Name: "worker", Replicas: 4, VGPUs: 1, MemoryMiB: 16000, Cores: 50},
		}},
		{"notebooks", []framework.VGPUTask{{Name: "nb", Replicas: 4, VGPUs: 1, MemoryMiB: 5000, Cores: 10}}},
		{"two-card", []framework.VGPUTask{{Name: "main", Replicas: 1, VGPUs: 2, MemoryMiB: 30000, Cores: 100}}},
		{"npu-inference", []framework.VGPUTask{{Name: "server", Replicas: 3, Limits: v1.ResourceList{
			ascendproto.ResourceDomain + npuChip:             resource.MustParse("1"),
			ascendproto.ResourceDomain + npuChip + "-memory": resource.MustParse("12000")}}}},
	}
}

type batchJob struct {
	name  string
	tasks []framework.VGPUTask
}

// Run runs the demo and tears the cluster down before returning (after ctx
// ends when Keep is set).
func Run(ctx context.Context, o Options) (err error) {
	t0 := time.Now()
	bins, err := framework.EnsureBinaries(ctx, o.Log)
	if err != nil {
		return err
	}
	built := time.Since(t0)
	t1 := time.Now()
	var c *framework.Cluster
	var real *framework.RealCluster
	if o.RealNode {
		// The chart's scheduler (in its pod) with the Ascend backend on
		// too, for the simulated Ascend node.
		real, err = framework.StartRealCluster(ctx, framework.RealClusterOptions{Log: o.Log, Simulated: true,
			ChartValues: []string{"--set", "deviceshare.AscendHAMiVNPUEnable=true"}})
		if err != nil {
			return err
		}
		c = real.Cluster
	} else if c, err = framework.Start(ctx, framework.Options{Binaries: bins, WorkDir: o.WorkDir, Log: o.Log, SchedulerConf: schedulerConf}); err != nil {
		return err
	}
	defer func() {
		if real != nil {
			real.Stop()
		} else {
			c.Stop()
		}
		if err == nil && !o.Keep && o.WorkDir == "" {
			_ = c.RemoveWorkDir()
		} else {
			fmt.Fprintf(o.Log, "demo: logs in %s\n", c.LogDir())
		}
	}()
	for i := range o.Nodes {
		if _, err := c.AddGPUNode(ctx, fmt.Sprintf("dgx-a100-%d", i), "dgxa100"); err != nil {
			return fmt.Errorf("%w\n%s", err, c.Tails(30))
		}
	}
	if _, err := c.AddAscendNode(ctx, framework.AscendNode{Name: "ascend-910b-0", Chip: npuChip, Chips: 2}); err != nil {
		return fmt.Errorf("%w\n%s", err, c.Tails(30))
	}
	up := time.Since(t1)
	if err := c.CreateNamespace(ctx, namespace); err != nil {
		return err
	}
	t2 := time.Now()
	all := jobs()
	if real != nil {
		all = onRealNode(real, all)
	}
	for _, j := range all {
		if err := c.CreateJob(ctx, framework.VGPUJob(namespace, j.name, j.tasks...)); err != nil {
			return err
		}
	}
	for _, j := range all {
		if err := c.WaitJobRunning(ctx, namespace, j.name, 2*time.Minute); err != nil {
			return fmt.Errorf("%w\n%s", err, c.Tails(30))
		}
	}
	if err := waitAdmitted(ctx, c); err != nil {
		return err
	}
	running := time.Since(t2)
	fmt.Fprintf(o.Out, "\n%d Volcano Jobs sharing the GPUs of %d simulated DGX A100 nodes and the NPUs of a simulated %s node.\n",
		len(all), o.Nodes, npuChip)
	if err := printPlugin(ctx, c, o); err != nil {
		return err
	}
	if real != nil {
		if err := printRealNode(ctx, real, o); err != nil {
			return err
		}
	}
	nodes := fmt.Sprintf("%d GPU nodes and 1 Ascend node", o.Nodes)
	if real != nil {
		nodes += ", the real node with the chart installed"
	}
	fmt.Fprintf(o.Out, "\nbinaries %s, control plane, %s %s, jobs Running %s\n",
		built.Round(time.Millisecond), nodes, up.Round(time.Millisecond), running.Round(time.Millisecond))
	if o.Keep {
		fmt.Fprintf(o.Out, "\nThe cluster keeps running until interrupted (Ctrl-C):\n  export KUBECONFIG=%s\n"+
			"  export PATH=%s:$PATH   # kubectl-vshare\n  kubectl vshare cards\n", c.Kubeconfig, bins.Own)
		<-ctx.Done()
	}
	return nil
}

// waitAdmitted waits until the node agents have served every demo pod
// (bind-phase success), so the pods table shows them admitted.
func waitAdmitted(ctx context.Context, c *framework.Cluster) error {
	return c.Poll(ctx, time.Minute, "demo pods admitted by their agents", func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Annotations[vgpuproto.AnnotationBindPhase] != vgpuproto.BindPhaseSuccess &&
				p.Annotations[ascendproto.AnnotationBindPhase] != ascendproto.BindPhaseSuccess {
				return false, fmt.Errorf("pod %s not admitted yet", p.Name)
			}
		}
		return true, nil
	})
}

// printPlugin prints the final tables through the kubectl plugin, as a
// user would see them with `kubectl vshare` against this cluster.
func printPlugin(ctx context.Context, c *framework.Cluster, o Options) error {
	for _, args := range [][]string{
		{"cards"},
		{"pods", "-n", namespace},
		{"fit", "--memory", "20000", "--cores", "30", "--number", "2", "--type", "A100"},
	} {
		fmt.Fprintf(o.Out, "\n$ kubectl vshare %s\n", strings.Join(args, " "))
		code := kubectlvshare.Run(ctx, append(args, "--kubeconfig", c.Kubeconfig), kubectlvshare.Env{Stdout: o.Out, Stderr: o.Log})
		if code != kubectlvshare.ExitOK && code != kubectlvshare.ExitNoFit {
			return fmt.Errorf("kubectl vshare %s: exit code %d", strings.Join(args, " "), code)
		}
	}
	return nil
}
