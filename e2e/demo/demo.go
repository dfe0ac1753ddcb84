//go:build e2e

// Package demo brings the local control plane up with simulated DGX A100
// nodes and a simulated Ascend 910B node, submits Volcano Jobs that share
// GPUs and NPUs, and prints who holds what on
// each card. It is what `make demo` runs.
package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	ascendproto "github.com/vgpushare/vshare/protocol/ascend"
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
	c, err := framework.Start(ctx, framework.Options{Binaries: bins, WorkDir: o.WorkDir, Log: o.Log, SchedulerConf: schedulerConf})
	if err != nil {
		return err
	}
	defer func() {
		c.Stop()
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
	for _, j := range jobs() {
		if err := c.CreateJob(ctx, framework.VGPUJob(namespace, j.name, j.tasks...)); err != nil {
			return err
		}
	}
	for _, j := range jobs() {
		if err := c.WaitJobRunning(ctx, namespace, j.name, 2*time.Minute); err != nil {
			return fmt.Errorf("%w\n%s", err, c.Tails(30))
		}
	}
	running := time.Since(t2)
	cards, err := c.Usage(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\n%d Volcano Jobs sharing the GPUs of %d simulated DGX A100 nodes:\n\n", len(jobs()), o.Nodes)
	framework.PrintUsage(o.Out, cards, false)
	if err := printNPUs(ctx, c, o.Out); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "\nbinaries %s, control plane, %d GPU nodes and 1 Ascend node %s, jobs Running %s\n",
		built.Round(time.Millisecond), o.Nodes, up.Round(time.Millisecond), running.Round(time.Millisecond))
	if o.Keep {
		fmt.Fprintf(o.Out, "\nThe cluster keeps running until interrupted (Ctrl-C):\n  export KUBECONFIG=%s\n", c.Kubeconfig)
		<-ctx.Done()
	}
	return nil
}

// printNPUs lists the vNPUs the demo's pods hold, from the allocation
// annotation huawei.com/<chip> (chip UUID and template).
func printNPUs(ctx context.Context, c *framework.Cluster, out io.Writer) error {
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	var rows []string
	for _, p := range pods.Items {
		info, err := ascendproto.DecodeRuntimeInfo(p.Annotations[ascendproto.KeysFor(npuChip).RuntimeInfo])
		if err != nil {
			continue
		}
		for _, i := range info {
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s", p.Spec.NodeName, i.UUID, i.Temp, p.Name))
		}
	}
	sort.Strings(rows)
	fmt.Fprintf(out, "\nAscend vNPUs (HAMi template mode, simulated %s node):\n\n", npuChip)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tCHIP\tTEMPLATE\tPOD")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	return w.Flush()
}
