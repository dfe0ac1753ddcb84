//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// The test-only crash hook exists only in schedulers built with the
// vsharetest tag (deviceshare/bind/crashhook.go; the harness builds with
// TestTags), so its names are spelt here rather than imported: this package
// is built without that tag.
const (
	// envCrashAtBind is bind.EnvTestCrashAtBind (deviceshare/bind).
	envCrashAtBind = "VSHARE_TEST_CRASH_AT_BIND"
	// crashHookMessage starts the line the hook writes before the
	// scheduler exits.
	crashHookMessage = envCrashAtBind + ": exiting"
)

// CrashAtBind is the scheduler environment that arms deviceshare's
// test-only crash hook (bind.EnvTestCrashAtBind (deviceshare/bind)): value "N" exits
// right before the process's N-th bind request, "call:N" when the binder's
// N-th Bind call arrives (Volcano makes one per task), before it binds.
func CrashAtBind(value string) []string {
	return []string{envCrashAtBind + "=" + value}
}

// WaitSchedulerCrash waits up to timeout for the running scheduler, started
// with CrashAtBind, to exit through the hook. It returns the hook's line
// (what the process was doing when it exited), or "" when the process is
// still running at the timeout; an error when it exited otherwise.
func (c *Cluster) WaitSchedulerCrash(ctx context.Context, timeout time.Duration) (string, error) {
	p := c.SchedulerProcess()
	if p == nil {
		return "", fmt.Errorf("no scheduler running")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		return "", nil
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "", fmt.Errorf("read scheduler log: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, crashHookMessage) {
			return line, nil
		}
	}
	_, why := p.Exited()
	return "", fmt.Errorf("%s exited (%v) without its crash hook's line:\n%s", p.Name, why, p.Tail(40))
}

// crashMidSession stops the scheduler (SIGTERM, only to arm the next one),
// starts one armed with the test-only crash hook at a random point (before
// the 1st to 8th bind request, or at the 1st to 3rd Bind call), waits up to
// 20 s for it to exit there, then starts a normal scheduler and, 5 s later,
// checks that every pod bound before (by the crashed process included)
// kept its node and allocation. The campaign's workload keeps pods
// pending, so a new scheduler's first sessions have binds to make.
func (inj *injector) crashMidSession(ctx context.Context) error {
	value := fmt.Sprintf("%d", 1+inj.r.IntN(8))
	if inj.r.IntN(2) == 0 {
		value = fmt.Sprintf("call:%d", 1+inj.r.IntN(3))
	}
	inj.c.StopScheduler()
	armed := inj.spec
	armed.Env = append(append([]string(nil), inj.spec.Env...), CrashAtBind(value)...)
	bg := context.WithoutCancel(ctx) // the campaign must end with a scheduler running
	// A start can fail because the hook fired before /healthz answered;
	// WaitSchedulerCrash tells.
	startErr := inj.c.StartSchedulerWith(bg, armed)
	line, err := inj.c.WaitSchedulerCrash(ctx, 20*time.Second)
	switch {
	case err != nil && startErr != nil:
		err = fmt.Errorf("armed scheduler: %v; %w", startErr, err)
	case line == "" && err == nil:
		inj.note("scheduler-crash not triggered: no bind within 20s")
	case err == nil:
		inj.count(FaultSchedulerCrash)
		inj.note("scheduler-crash " + crashWindow(line))
		fmt.Fprintf(inj.opts.Log, "faults: scheduler-crash-mid-session %s=%s: %s\n", envCrashAtBind, value, line)
	}
	snap := inj.a.SnapshotBound()
	inj.c.KillScheduler()
	if again := inj.restartAndCheckKept(ctx, snap); again != nil {
		return fmt.Errorf("after a crash mid-session: %w", again)
	}
	return err
}

// crashWindow names the window a crash hit, for the report's notes, from
// the hook's line: "before the session's first bind" (nothing bound by the
// process yet), "mid-burst" (other Bind calls of the process in flight:
// some of the session's pods bound or being bound, others not) or "between
// binds" (none in flight).
func crashWindow(line string) string {
	switch {
	case strings.Contains(line, ", 0 pods bound before"):
		return "before the session's first bind"
	case strings.Contains(line, ", 0 other Bind calls in flight"):
		return "between binds"
	default:
		return "mid-burst"
	}
}
