//go:build e2e

package framework

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// AllocationKeyFile is the cluster's allocation key (internal/allocsig), in
// WorkDir: our scheduler signs with it and every agent started with
// AgentSpec.Unsigned false verifies with it, as a production install with
// the chart's allocation key does.
func (c *Cluster) AllocationKeyFile() string { return filepath.Join(c.WorkDir, "allocation-key") }

func (c *Cluster) writeAllocationKey(context.Context) error {
	key := make([]byte, 36)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("allocation key: %w", err)
	}
	line := base64.RawURLEncoding.EncodeToString(key) + "\n"
	if err := os.WriteFile(c.AllocationKeyFile(), []byte(line), 0o600); err != nil {
		return fmt.Errorf("write allocation key: %w", err)
	}
	return nil
}

// VGPU reports whether the node runs a vgpu-device-plugin (and not, say,
// the simulated Ascend agent).
func (n *GPUNode) VGPU() bool { return n.machine != "" }

// AgentSpec says how StartAgent runs a GPU node's agent.
type AgentSpec struct {
	// Unsigned serves allocations without a signature (no
	// --allocation-key-file), as needed under Volcano's stock scheduler.
	Unsigned bool
	// Args are further agent flags (for example --health-recovery).
	Args []string
	// Env is added to the agent's environment (for example
	// VGPU_MOCK_NVML_EVENTS).
	Env []string
}

// StartAgent (re)starts the node's vgpu-device-plugin, after stopping the
// running one, and waits until it has registered with the fake kubelet
// again.
func (c *Cluster) StartAgent(ctx context.Context, n *GPUNode, spec AgentSpec) error {
	if !n.VGPU() {
		return fmt.Errorf("node %s has no vGPU agent", n.Name)
	}
	if n.Agent != nil {
		n.Agent.Stop()
	}
	regs := n.Kubelet.Registrations()
	args := []string{
		"--node-name=" + n.Name,
		"--nvml=mock:" + n.machine,
		"--kubeconfig=" + c.Kubeconfig,
		"--kubelet-socket-dir=" + filepath.Join(n.Dir, "dp"),
		"--cache-dir=" + filepath.Join(n.Dir, "cache"),
		"--libvgpu-host-path=" + filepath.Join(n.Dir, "libvgpu.so"),
		"--metrics-address=",
		"--handshake-interval=5s",
		"-v=4",
	}
	if !spec.Unsigned {
		args = append(args, "--allocation-key-file="+c.AllocationKeyFile())
	}
	args = append(args, spec.Args...)
	n.starts++
	name := "agent-" + n.Name
	if n.starts > 1 {
		name = fmt.Sprintf("%s-%d", name, n.starts)
	}
	p, err := startProcess(c.LogDir(), name, c.bins.Path(BinDevicePlugin), args, spec.Env)
	if err != nil {
		return err
	}
	n.Agent = p
	return c.poll(ctx, time.Minute, "node "+n.Name+" Ready with registered vGPUs", func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := got.Status.Allocatable[VGPUNumber]
		return n.Kubelet.Registrations() > regs && nodeReady(got) && got.Annotations[vgpuproto.AnnotationRegister] != "" && q.Value() > 0, nil
	}, n.Agent)
}
