//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestSchedulerCrashMidSession crashes the scheduler inside a session,
// between Volcano's allocate callbacks and the bindings, with deviceshare's
// test-only hook (VSHARE_TEST_CRASH_AT_BIND): three gangs of four half-card
// pods are submitted to a scheduler armed with the hook, which places them
// and exits
//
//   - before-first-bind (call:1): when the binder gets the session's first
//     task, before any bind: the API server saw no bind, and no pod may
//     carry a node or an allocation;
//   - mid-burst (3): right before its third bind request: Volcano binds
//     each task on its own goroutine, one pod per node at a time (the agent
//     turns), so a few pods are bound with their allocation and the rest of
//     their gangs not.
//
// A normal scheduler is started again. Every gang must then run whole,
// every pod admitted by its node agent with an Allocate answer matching its
// annotation, the pods bound before the crash must keep their node and
// allocation, and no card may be overcommitted by annotations or by the
// agents' answers (the fault campaign's auditor checks both).
func TestSchedulerCrashMidSession(t *testing.T) {
	for _, tc := range []struct{ name, hook string }{
		{"before-first-bind", "call:1"},
		{"mid-burst", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) { crashMidSession(t, "crash-"+tc.name, tc.hook) })
	}
}

func crashMidSession(t *testing.T, ns, hook string) {
	const (
		jobs    = 3
		perJob  = 4
		halfMiB = 16000
	)
	ctx := setup(t, ns, 5*time.Minute)
	a, err := framework.NewAuditor(ctx, cluster, ns, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	// Whatever happens, the next test gets a normal scheduler.
	t.Cleanup(func() {
		if cluster.SchedulerRunning() {
			return
		}
		cluster.KillScheduler()
		if err := cluster.StartScheduler(context.Background()); err != nil {
			t.Errorf("start the scheduler again: %v", err)
		}
	})

	// The armed scheduler enqueues the gangs (Volcano's job controller
	// creates their pods only then), places them in one session and exits
	// in its binds.
	cluster.StopScheduler()
	startErr := cluster.StartSchedulerWith(ctx, framework.SchedulerSpec{Env: framework.CrashAtBind(hook)})
	if startErr != nil && cluster.SchedulerRunning() {
		t.Fatal(startErr)
	}
	var names []string
	for i := range jobs {
		job := framework.VGPUJob(ns, fmt.Sprintf("gang-%d", i), framework.VGPUTask{Name: "w", Replicas: perJob, VGPUs: 1, MemoryMiB: halfMiB, Cores: 25})
		if err := cluster.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
		names = append(names, job.Name)
	}
	line, err := cluster.WaitSchedulerCrash(ctx, time.Minute)
	switch {
	case err != nil:
		t.Fatalf("armed scheduler (start: %v): %v", startErr, err)
	case line == "":
		t.Fatalf("the scheduler armed with %s did not exit within a minute", hook)
	}
	t.Logf("crashed: %s", line)
	cluster.KillScheduler() // reaps the exited process

	before, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boundBefore := map[string]v1.Pod{}
	for _, p := range before.Items {
		ids := p.Annotations[vgpuproto.AnnotationIDs]
		switch {
		case p.Spec.NodeName != "":
			boundBefore[p.Name] = p
		case ids != "":
			t.Errorf("pod %s carries an allocation (%s=%q) but no node after the crash", p.Name, vgpuproto.AnnotationIDs, ids)
		}
	}
	t.Logf("%d of %d pods bound when the scheduler crashed", len(boundBefore), jobs*perJob)
	if strings.HasPrefix(hook, "call:") && len(boundBefore) != 0 {
		t.Errorf("%d pods bound by a scheduler that exited before its first bind", len(boundBefore))
	}
	if !strings.HasPrefix(hook, "call:") && (len(boundBefore) == 0 || len(boundBefore) >= jobs*perJob) {
		t.Errorf("%d of %d pods bound by a scheduler that exited at its third bind request, want some but not all", len(boundBefore), jobs*perJob)
	}

	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := cluster.WaitJobRunning(ctx, ns, name, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	err = cluster.Poll(ctx, time.Minute, "every pod admitted by its node agent", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var waiting []string
		for _, p := range pods.Items {
			if p.Status.Phase != v1.PodRunning || p.Annotations[vgpuproto.AnnotationBindPhase] != vgpuproto.BindPhaseSuccess {
				waiting = append(waiting, fmt.Sprintf("%s (%s, %s=%q)", p.Name, p.Status.Phase, vgpuproto.AnnotationBindPhase, p.Annotations[vgpuproto.AnnotationBindPhase]))
			}
		}
		return len(pods.Items) == jobs*perJob && len(waiting) == 0, fmt.Errorf("%d pods, not yet admitted: %s", len(pods.Items), strings.Join(waiting, ", "))
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after.Items {
		if was, ok := boundBefore[p.Name]; ok && (was.UID != p.UID || was.Spec.NodeName != p.Spec.NodeName ||
			was.Annotations[vgpuproto.AnnotationIDs] != p.Annotations[vgpuproto.AnnotationIDs]) {
			t.Errorf("pod %s bound before the crash to %s with %q is now %s on %s with %q", p.Name, was.Spec.NodeName,
				was.Annotations[vgpuproto.AnnotationIDs], p.UID, p.Spec.NodeName, p.Annotations[vgpuproto.AnnotationIDs])
		}
	}
	// The campaign's auditor: cards by annotations and by the agents'
	// answers, answers against annotations, and every pod's end state.
	if _, err := a.Settle(ctx, time.Minute, func(context.Context) {}); err != nil {
		t.Fatal(err)
	}
	for _, v := range a.Violations() {
		t.Errorf("auditor: %s", v)
	}
	checkNoOvercommit(ctx, t)
}
