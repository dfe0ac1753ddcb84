//go:build e2e

package framework

import "context"

// RemoveGPUNode stops the node's agent and fake kubelet, forgets the node
// (so useAgents-style restarts skip it) and deletes the Node object: tests
// that add a node of another machine take it away again, leaving the shared
// cluster as the other tests expect it.
func (c *Cluster) RemoveGPUNode(ctx context.Context, name string) error {
	c.mu.Lock()
	var gone *GPUNode
	for i, n := range c.nodes {
		if n.Name == name {
			gone = n
			c.nodes = append(c.nodes[:i:i], c.nodes[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if gone != nil {
		gone.stop()
	}
	return c.DeleteNode(ctx, name)
}
