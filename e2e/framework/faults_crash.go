//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vgpushare/vshare/deviceshare"
)

// crashHookMessage starts the line deviceshare's test-only crash hook writes
// before the scheduler exits (deviceshare/crashhook.go).
const crashHookMessage = "VSHARE_TEST_CRASH_AT_BIND: exiting"

// CrashAtBind is the scheduler environment that arms deviceshare's
// test-only crash hook (deviceshare.EnvTestCrashAtBind): value "N" exits
// right before the process's N-th bind request, "burst:N" when the binder
// gets its N-th batch of tasks, before any of them is bound.
func CrashAtBind(value string) []string {
	return []string{deviceshare.EnvTestCrashAtBind + "=" + value}
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
// the 1st to 8th bind, or at the 1st to 3rd batch of binds), waits up to
// 20 s for it to exit there, then starts a normal scheduler and, 5 s later,
// checks that every pod bound before (by the crashed process included)
// kept its node and allocation. The campaign's workload keeps pods
// pending, so a new scheduler's first sessions have binds to make.
func (inj *injector) crashMidSession(ctx context.Context) error {
	value := fmt.Sprintf("%d", 1+inj.r.IntN(8))
	if inj.r.IntN(2) == 0 {
		value = fmt.Sprintf("burst:%d", 1+inj.r.IntN(3))
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
		inj.note("scheduler-crash " + crashWindow(value, line))
		fmt.Fprintf(inj.opts.Log, "faults: scheduler-crash-mid-session %s=%s: %s\n", deviceshare.EnvTestCrashAtBind, value, line)
	}
	snap := inj.a.SnapshotBound()
	inj.c.KillScheduler()
	var startAgain error
	for attempt := 0; attempt < 3; attempt++ {
		if startAgain = inj.c.StartSchedulerWith(bg, inj.spec); startAgain == nil {
			break
		}
		inj.c.KillScheduler()
	}
	if startAgain != nil {
		return fmt.Errorf("start the scheduler again after a crash mid-session: %w", startAgain)
	}
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		time.Sleep(5 * time.Second) // a fixed delay: let the new scheduler's first sessions run
		kept := inj.a.CheckKept(snap)
		inj.mu.Lock()
		inj.kept += kept
		inj.mu.Unlock()
	}()
	return err
}

// crashWindow names the window a crash hit, for the report's notes: before
// any bind of a batch (the session decided, the API server saw nothing) or
// in the middle of one (the hook's line says some of the batch's pods were
// bound, the others not).
func crashWindow(value, line string) string {
	switch {
	case strings.HasPrefix(value, "burst:"), strings.Contains(line, ", 0 of the current batch's"):
		return "before a batch's first bind"
	default:
		return "mid-batch"
	}
}
