//go:build e2e

package framework

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// FaultKind names a fault the campaign injects.
type FaultKind string

// Faults the campaign injects.
const (
	// FaultSchedulerKill kills the scheduler with SIGKILL and starts a new
	// one.
	FaultSchedulerKill FaultKind = "scheduler-kill"
	// FaultAgentKill kills a node agent with SIGKILL right before or while
	// the kubelet calls its Allocate, and starts it again 0.5-3 s later.
	FaultAgentKill FaultKind = "agent-kill-in-allocate"
	// FaultBoundPodDelete deletes a pod after its bind and before the
	// kubelet calls the agent's Allocate for it (a bind that fails after the
	// scheduler assumed it; with NodeLockEnable, a lock no agent releases).
	FaultBoundPodDelete FaultKind = "delete-bound-pod"
	// FaultPendingPodDelete deletes a pending pod the scheduler may be
	// placing (between its session and its bind).
	FaultPendingPodDelete FaultKind = "delete-pending-pod"
	// FaultKubeletSocket removes and recreates a node's kubelet.sock, as a
	// kubelet restart does; the agent must register again.
	FaultKubeletSocket FaultKind = "kubelet-socket"
	// FaultCardUnhealthy makes a card unhealthy (an Xid 79 or a double-bit
	// ECC error through the mock NVML); it is healthy again after the
	// agent's --health-recovery.
	FaultCardUnhealthy FaultKind = "card-unhealthy"
	// FaultSchedulerCrash crashes the scheduler inside a session, between
	// Volcano's allocate callbacks (the allocations noted with our binder,
	// assumed by the ledger) and the bindings: before the session's first
	// bind, or in the middle of its binds, some pods bound and some not. It uses
	// deviceshare's test-only crash hook (CrashAtBind), as a kill from
	// outside lands there only by chance.
	FaultSchedulerCrash FaultKind = "scheduler-crash-mid-session"
)

// AllFaults lists every fault kind.
func AllFaults() []FaultKind {
	return []FaultKind{FaultSchedulerKill, FaultAgentKill, FaultBoundPodDelete, FaultPendingPodDelete, FaultKubeletSocket, FaultCardUnhealthy, FaultSchedulerCrash}
}

// LockKey is the node lock annotation of the vGPU device type.
const LockKey = "hamivgpu"

// FaultHealthRecovery is the agents' --health-recovery during a campaign.
const FaultHealthRecovery = 6 * time.Second

// CampaignOptions configure one run of the fault campaign.
type CampaignOptions struct {
	// Seed drives the workload and the faults (each from its own source).
	Seed uint64
	// Duration is how long Jobs are submitted and faults injected.
	Duration time.Duration
	// Namespace holds the run's Jobs; empty means faults-<seed>.
	Namespace string
	// NodeLock runs the scheduler with deviceshare.NodeLockEnable and
	// deviceshare.NodeLockExpiry = NodeLockExpiry (default 10s).
	NodeLock       bool
	NodeLockExpiry time.Duration
	// Faults are the kinds injected; empty means AllFaults.
	Faults []FaultKind
	// FaultEvery is the mean time between two faults (default 3s).
	FaultEvery time.Duration
	// TargetPods is how many pods the live Jobs ask for (default 56:
	// somewhat more than the two DGX A100 nodes' cards hold).
	TargetPods int
	// SettleTimeout bounds the wait for the final state (default 2m).
	SettleTimeout time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (o *CampaignOptions) defaults() {
	if o.Namespace == "" {
		o.Namespace = fmt.Sprintf("faults-%d", o.Seed)
	}
	if o.NodeLockExpiry == 0 {
		o.NodeLockExpiry = 10 * time.Second
	}
	if len(o.Faults) == 0 {
		o.Faults = AllFaults()
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = 3 * time.Second
	}
	if o.TargetPods == 0 {
		o.TargetPods = 56
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// schedulerConf is the configuration the run's scheduler uses.
func (o *CampaignOptions) schedulerConf() string {
	if !o.NodeLock {
		return DefaultSchedulerConf
	}
	return DefaultSchedulerConf + fmt.Sprintf("      deviceshare.NodeLockEnable: true\n      deviceshare.NodeLockExpiry: %s\n", o.NodeLockExpiry)
}

// CampaignReport is what one run did and found.
type CampaignReport struct {
	Seed     uint64
	NodeLock bool
	// Duration is the fault phase; Settle the wait for the final state.
	Duration, Settle time.Duration
	// JobsSubmitted and JobsDeleted count the workload's Jobs, PodsAsked
	// the pods they asked for; JobsFailed the Jobs Volcano's job controller
	// failed after a pod's admission failed (deleted by the workload).
	JobsSubmitted, JobsDeleted, JobsFailed, PodsAsked int
	// PodsCreated, PodsBound and PodsAdmitted count distinct pods seen
	// created, bound and admitted by an agent (bind-phase success);
	// PodsFailedAdmission those the kubelet failed (UnexpectedAdmissionError).
	PodsCreated, PodsBound, PodsAdmitted, PodsFailedAdmission int
	// MaxLivePods is the most campaign pods seen holding cards at once.
	MaxLivePods int
	// Faults counts the faults injected, by kind; Notes details them.
	Faults map[FaultKind]int
	Notes  map[string]int
	// Samples counts the auditor's checks of every card.
	Samples int
	// Overlaps counts binds seen while another pod of the node was
	// pending with its agent; OverlapsSameCount those where both pods
	// have an entry of the same card count.
	Overlaps, OverlapsSameCount int
	// KeptAcrossRestarts counts pods found with the same node and
	// allocation after a scheduler restart (summed over restarts).
	KeptAcrossRestarts int
	// Locks counts node locks (NodeLock runs); LockRefusals the binds the
	// schedulers refused because of a held lock; LockProbes the nodes
	// with an expired lock that a probe pod then bound to.
	Locks                    LockCounts
	LockRefusals, LockProbes int
	Violations               []Violation
}

// Summary is a one-line account of the run.
func (r *CampaignReport) Summary() string {
	var faults []string
	for _, k := range AllFaults() {
		faults = append(faults, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	s := fmt.Sprintf("seed %d (node lock %t): %s faults, %s settle; jobs %d submitted / %d deleted / %d failed by Volcano; pods %d created, %d bound, %d admitted, %d failed admission; max %d live; faults %s; %d samples; %d allocations kept across restarts",
		r.Seed, r.NodeLock, r.Duration.Round(time.Second), r.Settle.Round(time.Second), r.JobsSubmitted, r.JobsDeleted, r.JobsFailed,
		r.PodsCreated, r.PodsBound, r.PodsAdmitted, r.PodsFailedAdmission, r.MaxLivePods, strings.Join(faults, " "),
		r.Samples, r.KeptAcrossRestarts)
	s += fmt.Sprintf("; binds beside a pod pending with the agent %d (of the same card count %d)", r.Overlaps, r.OverlapsSameCount)
	if r.NodeLock {
		s += fmt.Sprintf("; locks %d taken, %d released, %d expired (%d taken over), %d refusals, %d probes",
			r.Locks.Taken, r.Locks.Released, r.Locks.Expired, r.Locks.TakenOver, r.LockRefusals, r.LockProbes)
	}
	if len(r.Notes) > 0 {
		var notes []string
		for k, v := range r.Notes {
			notes = append(notes, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(notes)
		s += "; " + strings.Join(notes, " ")
	}
	return s + fmt.Sprintf("; %d violations", len(r.Violations))
}

// PrepareFaults restarts every vGPU node's agent as the campaign needs it
// (FaultAgentSpec), makes the fake kubelets fail pods on admission errors
// and log every Allocate to logs/kubelet-<node>.log. The returned function undoes the kubelet changes and starts the
// cluster's default scheduler again.
func (c *Cluster) PrepareFaults(ctx context.Context) (restore func(context.Context) error, err error) {
	var logs []*os.File
	for _, n := range c.Nodes() {
		if !n.VGPU() {
			continue
		}
		if err := c.restartFaultAgent(ctx, n); err != nil {
			return nil, err
		}
		n.Kubelet.SetFailPodsOnAdmissionError(true)
		f, err := os.OpenFile(filepath.Join(c.LogDir(), "kubelet-"+n.Name+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("kubelet log of %s: %w", n.Name, err)
		}
		n.Kubelet.SetLog(f)
		logs = append(logs, f)
	}
	return func(ctx context.Context) error {
		for _, n := range c.Nodes() {
			if n.VGPU() {
				n.Kubelet.SetBeforeAllocate(nil)
				n.Kubelet.SetFailPodsOnAdmissionError(false)
				n.Kubelet.SetLog(nil)
			}
		}
		for _, f := range logs {
			f.Close()
		}
		c.StopScheduler()
		return c.StartScheduler(ctx)
	}, nil
}

// restartFaultAgent starts the node's agent with FaultAgentSpec, on an
// empty NVML events file (a new agent process sees no old events, as with a
// real GPU).
func (c *Cluster) restartFaultAgent(ctx context.Context, n *GPUNode) error {
	if err := os.WriteFile(n.NVMLEventsFile(), nil, 0o644); err != nil {
		return fmt.Errorf("empty NVML events of %s: %w", n.Name, err)
	}
	return c.StartAgent(ctx, n, n.FaultAgentSpec(FaultHealthRecovery.String()))
}

// RunFaultCampaign runs one seed: the workload and the faults for
// Duration, then heals the cluster, waits for the final state, checks it,
// deletes the run's Jobs and probes expired node locks. Call PrepareFaults
// first. An error means the harness could not run the campaign; what the
// campaign found is in the report's Violations.
func (c *Cluster) RunFaultCampaign(ctx context.Context, opts CampaignOptions) (*CampaignReport, error) {
	opts.defaults()
	rep := &CampaignReport{Seed: opts.Seed, NodeLock: opts.NodeLock, Faults: map[FaultKind]int{}, Notes: map[string]int{}}
	if err := c.CreateNamespace(ctx, opts.Namespace); err != nil {
		return nil, err
	}
	lockKey := ""
	if opts.NodeLock {
		lockKey = LockKey
	}
	a, err := NewAuditor(ctx, c, opts.Namespace, lockKey, opts.NodeLockExpiry)
	if err != nil {
		return nil, err
	}
	defer a.Stop()
	spec := SchedulerSpec{Conf: opts.schedulerConf()}
	logsBefore := len(c.SchedulerLogs())
	c.KillScheduler()
	if err := c.StartSchedulerWith(ctx, spec); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "faults: seed %d, node lock %t, %s in namespace %s\n", opts.Seed, opts.NodeLock, opts.Duration, opts.Namespace)

	w := &workload{c: c, ns: opts.Namespace, r: rand.New(rand.NewPCG(opts.Seed, 1)), targetPods: opts.TargetPods,
		lifetime: [2]time.Duration{8 * time.Second, 25 * time.Second}}
	inj := newInjector(c, a, &opts, spec, rand.New(rand.NewPCG(opts.Seed, 2)))
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, opts.Duration)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); w.run(runCtx) }()
	go func() { defer wg.Done(); inj.run(runCtx) }()
	go func() {
		defer wg.Done()
		_ = wait.PollUntilContextCancel(runCtx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
			a.Sample()
			return false, nil
		})
	}()
	wg.Wait()
	stop()
	rep.Duration = time.Since(start)
	if err := inj.heal(ctx); err != nil {
		return nil, err
	}
	if rep.Settle, err = a.Settle(ctx, opts.SettleTimeout, w.reap); err != nil {
		return nil, err
	}
	if err := c.finishCampaign(ctx, a, w, &opts, rep, c.SchedulerLogs()[logsBefore:]); err != nil {
		return nil, err
	}
	inj.report(rep)
	rep.JobsSubmitted, rep.JobsDeleted, rep.JobsFailed, rep.PodsAsked = w.Submitted, w.Deleted, w.Failed, w.Pods
	a.fill(rep)
	return rep, nil
}

// finishCampaign checks the schedulers' lock refusals, deletes the run's
// Jobs and waits for their pods to go, then probes every node whose lock
// expired without being released.
func (c *Cluster) finishCampaign(ctx context.Context, a *Auditor, w *workload, opts *CampaignOptions, rep *CampaignReport, logs []string) error {
	if opts.NodeLock {
		n, err := a.CheckLockLogs(logs)
		if err != nil {
			return err
		}
		rep.LockRefusals = n
	}
	w.deleteAll(ctx)
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.collectGarbage(ctx, opts.Namespace); err != nil {
			return false, nil
		}
		pods, err := c.Kube.CoreV1().Pods(opts.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("delete the pods of campaign %d: %w", opts.Seed, err)
	}
	a.Sample()
	if !opts.NodeLock {
		return nil
	}
	for _, node := range a.ExpiredLocks() {
		if err := c.probeLockedNode(ctx, a, opts.Namespace, node); err != nil {
			return err
		}
		rep.LockProbes++
	}
	return nil
}

// probeLockedNode submits a small pod pinned to a node whose lock expired
// and flags the node if the pod is not bound within a minute.
func (c *Cluster) probeLockedNode(ctx context.Context, a *Auditor, ns, node string) error {
	name := "lock-probe-" + node
	job := VGPUJob(ns, name, VGPUTask{Name: "p", Replicas: 1, VGPUs: 1, MemoryMiB: 1000, Cores: 1,
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
	if err := c.CreateJob(ctx, job); err != nil {
		return err
	}
	defer func() { _ = c.deleteJobNow(context.WithoutCancel(ctx), ns, name) }()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.JobPods(ctx, ns, name)
		return err == nil && len(pods) == 1 && pods[0].Spec.NodeName == node, nil
	})
	if err != nil {
		a.flag(ViolationLock, node, "a pod pinned to the node was not bound within a minute although the node's lock had expired")
	}
	return nil
}

// fill copies the auditor's counts into the report.
func (a *Auditor) fill(rep *CampaignReport) {
	a.mu.Lock()
	rep.PodsCreated, rep.PodsBound = len(a.seenPods), len(a.seenBound)
	rep.PodsAdmitted, rep.PodsFailedAdmission = len(a.seenAdmitted), len(a.seenAdmissionFailed)
	rep.MaxLivePods, rep.Samples = a.maxLive, a.samples
	rep.Overlaps, rep.OverlapsSameCount = a.overlaps, a.overlapsSameCount
	a.mu.Unlock()
	rep.Locks = a.LockStats()
	rep.Violations = a.Violations()
}
