//go:build e2e

package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports (proc(5), "utime ... measured in
// clock ticks (divide by sysconf(_SC_CLK_TCK))"; the kernel exports
// USER_HZ=100 to user space whatever its internal HZ).
const clockTick = 10 * time.Millisecond

// HarnessComponent names the harness's own process in CPUByComponent: the
// fake kubelets and the test's informers run there.
const HarnessComponent = "harness (fake kubelets, test)"

// CPUByComponent returns the CPU time (user + system) each live child has
// used since it started, summed by component: a child's name without the
// node it serves ("agent-node-007" counts as "agent") or its restart
// count, plus the harness's own process. Children that have exited are
// not counted; take the difference of two calls around the interval of
// interest.
func (c *Cluster) CPUByComponent() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, p := range c.children() {
		if done, _ := p.Exited(); done {
			continue
		}
		t, err := cpuTime(p.cmd.Process.Pid)
		if err != nil {
			if done, _ := p.Exited(); done {
				continue // exited while we read
			}
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out[component(p.Name)] += t
	}
	self, err := cpuTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	out[HarnessComponent] = self
	return out, nil
}

// component strips what differs between instances of one kind of child.
func component(name string) string {
	for _, prefix := range []string{"agent-", "vnpu-agent-"} {
		if strings.HasPrefix(name, prefix) {
			return strings.TrimSuffix(prefix, "-")
		}
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// cpuTime reads utime + stime of pid from /proc/<pid>/stat (proc(5)):
// fields 14 and 15, counted after the parenthesised command name, which
// may itself hold spaces and parentheses.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	var ticks uint64
	for _, field := range f[11:13] {
		n, err := strconv.ParseUint(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: CPU time %q: %w", pid, field, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
