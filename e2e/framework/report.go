//go:build e2e

package framework

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// CardShare is one container's share of one card.
type CardShare struct {
	Pod       string // namespace/name
	MemoryMiB int
	Cores     int
}

// Card is one registered GPU and who holds what on it.
type Card struct {
	Node, UUID, Type  string
	Shares, MemoryMiB int
	Holders           []CardShare
}

// Usage reads the cards the nodes register and the allocations pods carry
// (volcano.sh/vgpu-ids-new), decoded with protocol/vgpuproto; values that do not
// decode are left out. A pod whose init containers have entries holds each
// card at its peak (vgpuproto.Peak), as the scheduler charges it: one share
// per holder there, the first carrying the memory and cores.
func (c *Cluster) Usage(ctx context.Context) ([]Card, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var cards []Card
	index := map[string]int{}
	for _, n := range nodes.Items {
		registered, _ := vgpuproto.DecodeRegister(n.Annotations[vgpuproto.AnnotationRegister])
		for _, r := range registered {
			index[n.Name+"/"+r.UUID] = len(cards) // mock machines repeat UUIDs across nodes
			cards = append(cards, Card{Node: n.Name, UUID: r.UUID, Type: r.Type, Shares: int(r.Count), MemoryMiB: int(r.MemMiB)})
		}
	}
	pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods.Items {
		entries, _ := vgpuproto.DecodeAllocation(p.Annotations[vgpuproto.AnnotationIDs])
		name := p.Namespace + "/" + p.Name
		if roles := vgpuproto.EntryRoles(&p, len(entries)); roles != nil {
			for _, ch := range vgpuproto.PeakOfEntries(roles, entries) {
				if i, ok := index[p.Spec.NodeName+"/"+ch.Card]; ok {
					for h := int32(0); h < ch.Holders; h++ {
						share := CardShare{Pod: name}
						if h == 0 {
							share.MemoryMiB, share.Cores = int(ch.Mem), int(ch.Cores)
						}
						cards[i].Holders = append(cards[i].Holders, share)
					}
				}
			}
			continue
		}
		for _, devs := range entries {
			for _, d := range devs {
				i, ok := index[p.Spec.NodeName+"/"+d.UUID]
				if !ok {
					continue
				}
				cards[i].Holders = append(cards[i].Holders, CardShare{Pod: name, MemoryMiB: int(d.Mem), Cores: int(d.Cores)})
			}
		}
	}
	sort.SliceStable(cards, func(i, j int) bool {
		if cards[i].Node != cards[j].Node {
			return cards[i].Node < cards[j].Node
		}
		return cards[i].UUID < cards[j].UUID
	})
	return cards, nil
}
