//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Node annotations and resources the harness relies on.
const (
	// KwokNodeAnnotation marks the nodes kwok manages (value "fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// VGPUNumber is the device-plugin resource the agent advertises.
	VGPUNumber = vgpuproto.ResourceNumber
)

// GPUNode is a kwok node with a vgpu-device-plugin process (mock NVML) and a
// fake kubelet.
type GPUNode struct {
	Name    string
	Dir     string
	Agent   *Process
	Kubelet *FakeKubelet

	machine string // the mock NVML machine
	starts  int    // agent starts, to name each one's log
}

func (n *GPUNode) stop() {
	if n.Agent != nil {
		n.Agent.Stop()
	}
	if n.Kubelet != nil {
		n.Kubelet.Stop()
	}
}

// AddGPUNode creates node name (kwok-managed, 64 CPUs, 512 GiB), starts its
// fake kubelet and its agent with --nvml=mock:<machine> (e.g. dgxa100) and
// the cluster's allocation key (StartAgent), and waits until the node is Ready, registers its cards and advertises
// volcano.sh/vgpu-number.
func (c *Cluster) AddGPUNode(ctx context.Context, name, machine string) (*GPUNode, error) {
	return c.AddGPUNodeWith(ctx, name, machine, AgentSpec{})
}

// AddGPUNodeWith is AddGPUNode with the agent started as spec says.
func (c *Cluster) AddGPUNodeWith(ctx context.Context, name, machine string, spec AgentSpec) (*GPUNode, error) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name},
		},
		Status: v1.NodeStatus{
			Capacity:    nodeResources(),
			Allocatable: nodeResources(),
			Phase:       v1.NodeRunning,
		},
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	n := &GPUNode{Name: name, Dir: filepath.Join(c.WorkDir, "nodes", name), machine: machine}
	sockets := filepath.Join(n.Dir, "dp")
	for _, d := range []string{sockets, filepath.Join(n.Dir, "cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	var err error
	if n.Kubelet, err = StartFakeKubelet(ctx, name, sockets, c.Kube); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	if err := c.StartAgent(ctx, n, spec); err != nil {
		return nil, err
	}
	return n, nil
}

// Nodes returns the GPU nodes added so far.
func (c *Cluster) Nodes() []*GPUNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*GPUNode(nil), c.nodes...)
}

// Node returns the GPU node called name, or nil.
func (c *Cluster) Node(name string) *GPUNode {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func nodeResources() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("512Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// AddNode creates a kwok-managed node with no node agent and no fake
// kubelet: what a node looks like to the scheduler when another agent (or
// none) registered it. extra is added to the usual CPU, memory and pods in
// both capacity and allocatable. It waits until kwok reports the node Ready.
func (c *Cluster) AddNode(ctx context.Context, name string, extra v1.ResourceList, annotations, labels map[string]string) error {
	res := nodeResources()
	for k, q := range extra {
		res[k] = q
	}
	ann := map[string]string{KwokNodeAnnotation: "fake"}
	for k, v := range annotations {
		ann[k] = v
	}
	lbl := map[string]string{"type": "kwok", "kubernetes.io/hostname": name}
	for k, v := range labels {
		lbl[k] = v
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann, Labels: lbl},
		Status:     v1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy(), Phase: v1.NodeRunning},
	}
	if _, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return c.poll(ctx, time.Minute, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		got, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(got), nil
	})
}

// DeleteNode deletes a node added with AddNode and waits until it is gone.
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	err := c.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return c.poll(ctx, time.Minute, "node "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
