// Package nodeannot computes the node-annotation patches the node agents
// write (their registration), so that they patch only what changed.
package nodeannot

import (
	"maps"

	v1 "k8s.io/api/core/v1"
)

// Diff returns the desired annotations whose values differ from the node's
// (patch), and the node's annotations as Diff saw them (current). While the
// informer still shows the node at the resourceVersion an agent last
// patched (writtenRV), that patch (written) is taken as applied, so it is
// not written again. current is a copy, never nil.
func Diff(node *v1.Node, writtenRV string, written, desired map[string]string) (patch, current map[string]string) {
	current = maps.Clone(node.Annotations)
	if current == nil {
		current = map[string]string{}
	}
	if node.ResourceVersion == writtenRV {
		maps.Copy(current, written)
	}
	patch = map[string]string{}
	for k, v := range desired {
		if current[k] != v {
			patch[k] = v
		}
	}
	return patch, current
}
