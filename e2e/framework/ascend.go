//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// AscendNode describes a simulated HAMi Ascend node.
type AscendNode struct {
	// Name is the node's name.
	Name string
	// Chip is the commonWord of the vnpus entry the chips follow (for
	// example Ascend910B3); the agent reads the entry from the device
	// ConfigMap at start, or the built-in catalogue.
	Chip string
	// Chips is how many chips the node has.
	Chips int
	// Mode is "" (the configuration's), "template" or "hami-core".
	Mode string
	// Labels are added to the node's.
	Labels map[string]string
}

// AddAscendNode creates a kwok node with a fake kubelet and the simulated
// Ascend agent (vnpu-agent) and waits until the node is Ready, carries the
// agent's registration hami.io/node-register-<Chip> and advertises the
// chip's resource. The node and its processes go away with the cluster, or
// earlier with RemoveNode.
func (c *Cluster) AddAscendNode(ctx context.Context, spec AscendNode) (*GPUNode, error) {
	labels := map[string]string{"type": "kwok", "kubernetes.io/hostname": spec.Name}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels:      labels,
		},
		Status: v1.NodeStatus{Capacity: nodeResources(), Allocatable: nodeResources(), Phase: v1.NodeRunning},
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", spec.Name, err)
	}
	n := &GPUNode{Name: spec.Name, Dir: filepath.Join(c.WorkDir, "nodes", spec.Name)}
	sockets := filepath.Join(n.Dir, "dp")
	if err := os.MkdirAll(sockets, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", sockets, err)
	}
	var err error
	if n.Kubelet, err = StartFakeKubelet(ctx, spec.Name, sockets, c.Kube); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	args := []string{
		"--node-name=" + spec.Name,
		"--chip=" + spec.Chip,
		"--chips=" + strconv.Itoa(spec.Chips),
		"--kubeconfig=" + c.Kubeconfig,
		"--kubelet-socket-dir=" + sockets,
		"--handshake-interval=5s",
		"-v=4",
	}
	if spec.Mode != "" {
		args = append(args, "--mode="+spec.Mode)
	}
	n.Agent, err = startProcess(c.LogDir(), "vnpu-agent-"+spec.Name, c.bins.Path(BinVNPUAgent), args, nil)
	if err != nil {
		return nil, err
	}
	register := ascendproto.KeysFor(spec.Chip).Register
	err = c.poll(ctx, time.Minute, "node "+spec.Name+" Ready with registered "+spec.Chip+" chips", func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		registered := got.Annotations[register] != ""
		q := got.Status.Allocatable[v1.ResourceName(n.Kubelet.Resource())]
		return nodeReady(got) && registered && q.Value() > 0, nil
	}, n.Agent)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// RemoveNode stops a node's agent and fake kubelet and deletes the node.
func (c *Cluster) RemoveNode(ctx context.Context, name string) error {
	c.mu.Lock()
	for i, n := range c.nodes {
		if n.Name == name {
			n.stop()
			c.nodes = append(c.nodes[:i], c.nodes[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	return c.DeleteNode(ctx, name)
}
