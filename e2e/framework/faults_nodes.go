//go:build e2e

package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NVMLEventsFile is the file the node's agent reads injected NVML events
// from when it runs with FaultAgentSpec.
func (n *GPUNode) NVMLEventsFile() string { return filepath.Join(n.Dir, "nvml-events") }

// FaultAgentSpec runs the node's agent as the fault campaign needs it: it
// follows NVMLEventsFile (VGPU_MOCK_NVML_EVENTS) and reports an unhealthy
// card healthy again after healthRecovery without a new error.
func (n *GPUNode) FaultAgentSpec(healthRecovery string) AgentSpec {
	return AgentSpec{
		Args: []string{"--health-recovery=" + healthRecovery},
		Env:  []string{"VGPU_MOCK_NVML_EVENTS=" + n.NVMLEventsFile()},
	}
}

// KillAgent kills the node's agent with SIGKILL, as a crash would, and waits
// until it has exited. StartAgent starts it again.
func (n *GPUNode) KillAgent() {
	if n.Agent != nil {
		n.Agent.Kill()
	}
}

// AgentAlive reports whether the node's agent process is running.
func (n *GPUNode) AgentAlive() bool {
	if n.Agent == nil {
		return false
	}
	gone, _ := n.Agent.Exited()
	return !gone
}

// InjectNVMLEvent appends an event for the card to NVMLEventsFile: kind is
// "xid <n>" (an Xid critical error) or "ecc" (a double-bit ECC error).
func (n *GPUNode) InjectNVMLEvent(uuid, kind string) error {
	f, err := os.OpenFile(n.NVMLEventsFile(), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open NVML events of %s: %w", n.Name, err)
	}
	if _, err := fmt.Fprintf(f, "%s %s\n", uuid, kind); err != nil {
		f.Close()
		return fmt.Errorf("write NVML event for %s on %s: %w", uuid, n.Name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write NVML event for %s on %s: %w", uuid, n.Name, err)
	}
	return nil
}

// SchedulerLogs returns the log files of every vc-scheduler started so far,
// oldest first.
func (c *Cluster) SchedulerLogs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.procs {
		if strings.HasPrefix(p.Name, "vc-scheduler") {
			out = append(out, p.LogPath)
		}
	}
	return out
}

// SchedulerRunning reports whether a vc-scheduler is running.
func (c *Cluster) SchedulerRunning() bool {
	c.mu.Lock()
	p := c.scheduler
	c.mu.Unlock()
	if p == nil {
		return false
	}
	gone, _ := p.Exited()
	return !gone
}
