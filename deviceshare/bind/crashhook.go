//go:build vsharetest

package bind

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
// is inert unless set. This file is compiled only with the vsharetest build
// tag, which the e2e framework sets when it builds the scheduler it runs
// (e2e/framework/build.go); release builds (images/, make build) get the
// inert twin in crashhook_release.go, which neither reads the variable nor
// can exit, so no environment makes a release scheduler crash. The e2e fault
// campaign (scheduler-crash-mid-session) and TestSchedulerCrashMidSession
// use it, as a kill from outside cannot land reliably in that window (a
// session binds everything within milliseconds).
//
// Volcano v1.10 hands the binder the tasks a session placed one per Bind
// call (BATCH_BIND_NUM, default 1), each call on its own goroutine, so a
// session's binds run concurrently, one pod per node at a time through the
// agent turns (serial.go). Values:
//
//   - "call:N" (N >= 1): exit when the binder's N-th non-empty Bind call
//     arrives, before its agent turn, node locks and bind. In a new
//     process, "call:1" is the session decided (Volcano's cache and the
//     node state assume the allocations), the API server has seen no bind.
//   - "N" (N >= 1): exit right before the process's N-th bind request,
//     after that pod's agent turn and node locks (NodeLockEnable) are taken
//     and its allocation annotations built, before the v1.Binding is sent.
//     Other binds of the session are bound, in flight or waiting for their
//     node's turn: the middle of a burst.
//
// The allocation annotations travel on the v1.Binding itself (binder.go),
// so no window exists where a pod carries its allocation but no node.
const EnvTestCrashAtBind = "VSHARE_TEST_CRASH_AT_BIND"

// crashHookMessage starts the line the hook writes to stderr before it
// exits; the e2e harness looks for it in the scheduler's log.
const crashHookMessage = "VSHARE_TEST_CRASH_AT_BIND: exiting"

// crashHook is the armed EnvTestCrashAtBind; a nil *crashHook is inert.
type crashHook struct {
	// at is the bind request (or, with atCall, the Bind call) to exit at.
	at     int64
	atCall bool
	// binds and calls count the bind requests and Bind calls seen; bound
	// the binds that succeeded; inFlight the Bind calls not returned yet.
	binds, calls, bound, inFlight atomic.Int64
	// exit ends the process (os.Exit; tests replace it).
	exit func(code int)
	// halt stops a bind that comes after the crash point while the
	// crashing goroutine is still on its way to exit (it flushes the logs
	// and prints first); it blocks forever (tests record it instead).
	// Without it, a Bind call on another goroutine sent its binding in
	// that window: two pods bound by a scheduler that "exited before its
	// first bind" (seen in TestSchedulerCrashMidSession under load).
	halt func()
}

// parseCrashHook reads an EnvTestCrashAtBind value; "" means not armed.
func parseCrashHook(v string) (*crashHook, error) {
	if v == "" {
		return nil, nil
	}
	num, atCall := strings.CutPrefix(v, "call:")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: want N or call:N with N a whole number >= 1 (exit before the N-th bind request, or at the N-th Bind call)", EnvTestCrashAtBind, v)
	}
	return &crashHook{at: n, atCall: atCall, exit: os.Exit, halt: func() { select {} }}, nil
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
		klog.InfoS("TEST-ONLY crash hook armed: this scheduler exits in the middle of its binds", "env", EnvTestCrashAtBind, "at", h.at, "atCall", h.atCall)
	}
	return h
}

// beforeCall runs when Bind is called; afterCall when it returns.
func (h *crashHook) beforeCall(tasks []*vcapi.TaskInfo) {
	if h == nil || len(tasks) == 0 {
		return
	}
	others := h.inFlight.Add(1) - 1
	if n := h.calls.Add(1); h.atCall && n == h.at {
		h.crash(fmt.Sprintf("at Bind call %d (%d tasks, none bound), %d other Bind calls in flight, %d pods bound before by this process", n, len(tasks), others, h.bound.Load()))
	}
}

func (h *crashHook) afterCall(tasks []*vcapi.TaskInfo) {
	if h != nil && len(tasks) > 0 {
		h.inFlight.Add(-1)
	}
}

// beforeBind runs right before the v1.Binding of task is sent. A bind past
// the crash point halts: with call:N, any bind once the N-th Bind call has
// come (its goroutine is crashing: the counter moved before it decided);
// with N, any bind request after the N-th.
func (h *crashHook) beforeBind(task *vcapi.TaskInfo) {
	if h == nil {
		return
	}
	n := h.binds.Add(1)
	switch {
	case !h.atCall && n == h.at:
		h.crash(fmt.Sprintf("before bind request %d (pod %s/%s to node %s), %d other Bind calls in flight, %d pods bound before by this process",
			n, task.Namespace, task.Name, task.NodeName, h.inFlight.Load()-1, h.bound.Load()))
	case !h.atCall && n > h.at, h.atCall && h.calls.Load() >= h.at:
		h.halt()
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
