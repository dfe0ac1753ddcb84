package deviceshare

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// EnvTestCrashAtBind arms a TEST-ONLY fault: the scheduler process exits
// (os.Exit(2), no deferred functions, no cleanup: a crash as far as the
// cluster can tell) inside the window between a session's decisions and
// their bindings. It is read once, when the plugin's State is created, and
// is inert unless set; production deployments never set it. The e2e fault
// campaign (scheduler-crash-mid-session) and TestSchedulerCrashMidSession
// use it, as a kill from outside cannot land reliably in that window (a
// session binds everything within milliseconds).
//
// Values:
//
//   - "N" (N >= 1): exit just before the process's N-th bind request, after
//     that pod's node locks are taken (NodeLockEnable) and its allocation
//     annotations are built, before the v1.Binding is sent. Binds to other
//     nodes of the same burst run in parallel, so some of the burst's pods
//     may be bound and others not: the middle of a burst.
//   - "burst:N" (N >= 1): exit when Volcano hands the binder its N-th
//     non-empty batch of tasks, before any of them is bound: the session
//     decided (Volcano's cache and the ledger assume the allocations), the
//     API server has seen nothing.
//
// The allocation annotations travel on the v1.Binding itself (binder.go),
// so no window exists where a pod carries its allocation but no node.
const EnvTestCrashAtBind = "VSHARE_TEST_CRASH_AT_BIND"

// crashHookMessage starts the line the hook writes to stderr before it
// exits; the e2e harness looks for it in the scheduler's log.
const crashHookMessage = "VSHARE_TEST_CRASH_AT_BIND: exiting"

// crashHook is the armed EnvTestCrashAtBind; a nil *crashHook is inert.
type crashHook struct {
	// at is the bind (or, with burst, the batch) to exit at.
	at    int64
	burst bool
	// binds and bursts count the bind requests and batches seen; bound the
	// binds that succeeded.
	binds, bursts, bound atomic.Int64
	// batchStart is bound when the latest batch came, batchSize its tasks
	// (Volcano's batches rarely overlap, so bound-batchStart is about the
	// binds of the batch in progress).
	batchStart, batchSize atomic.Int64
	// exit ends the process (os.Exit; tests replace it).
	exit func(code int)
}

// parseCrashHook reads an EnvTestCrashAtBind value; "" means not armed.
func parseCrashHook(v string) (*crashHook, error) {
	if v == "" {
		return nil, nil
	}
	num, burst := strings.CutPrefix(v, "burst:")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: want N or burst:N with N a whole number >= 1 (exit before the N-th bind, or at the N-th batch of binds)", EnvTestCrashAtBind, v)
	}
	return &crashHook{at: n, burst: burst, exit: os.Exit}, nil
}

// crashHookFromEnv arms the hook from the environment; a malformed value
// stops the process with a message naming the variable.
func crashHookFromEnv() *crashHook {
	h, err := parseCrashHook(os.Getenv(EnvTestCrashAtBind))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if h != nil {
		klog.InfoS("TEST-ONLY crash hook armed: this scheduler exits in the middle of its binds", "env", EnvTestCrashAtBind, "at", h.at, "burst", h.burst)
	}
	return h
}

// beforeBurst runs when the binder receives a batch of tasks.
func (h *crashHook) beforeBurst(tasks []*vcapi.TaskInfo) {
	if h == nil || len(tasks) == 0 {
		return
	}
	h.batchStart.Store(h.bound.Load())
	h.batchSize.Store(int64(len(tasks)))
	if n := h.bursts.Add(1); h.burst && n == h.at {
		h.crash(fmt.Sprintf("at batch %d of binds (%d tasks, none bound), %d pods bound before by this process", n, len(tasks), h.bound.Load()))
	}
}

// beforeBind runs right before the v1.Binding of task is sent.
func (h *crashHook) beforeBind(task *vcapi.TaskInfo) {
	if h == nil {
		return
	}
	if n := h.binds.Add(1); !h.burst && n == h.at {
		bound := h.bound.Load()
		h.crash(fmt.Sprintf("before bind %d (pod %s/%s to node %s), %d of the current batch's %d tasks bound, %d pods bound before by this process",
			n, task.Namespace, task.Name, task.NodeName, bound-h.batchStart.Load(), h.batchSize.Load(), bound))
	}
}

// afterBind counts a bind that succeeded.
func (h *crashHook) afterBind() {
	if h != nil {
		h.bound.Add(1)
	}
}

func (h *crashHook) crash(what string) {
	klog.Flush()
	fmt.Fprintf(os.Stderr, "%s %s\n", crashHookMessage, what)
	h.exit(2)
}
