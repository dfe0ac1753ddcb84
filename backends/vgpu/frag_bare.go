package vgpu

// BareNodeScore is the fragment policy's score, for a pod without vGPUs,
// of a node that has no vGPU cards: the pod strands no card there, so the
// fragmentation term is at its middle step (no change), and there is no
// idle card, so the packing term is full. It is at least the score of any
// node with cards (a pod's CPU and memory can only strand cards), so under
// the fragment policy pods without vGPUs go to nodes without cards first.
func (b *Backend) BareNodeScore() float64 { return levels(logistic(0), 1) }
