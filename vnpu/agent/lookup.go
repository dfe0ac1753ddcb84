package agent

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

// indexPending is the name of the pod index holding the pods with cards
// of the chip type left to serve; all of them are under the key pending.
const (
	indexPendingPrefix = "vnpu-pending-"
	pending            = "pending"
)

// PodLookup finds the node's pods waiting for Ascend chips. It must be
// cheap: Allocate calls it on every request.
type PodLookup interface {
	// Pending returns the non-terminal pods whose
	// hami.io/<commonWord>-devices-to-allocate still names a card, in any
	// bind-phase.
	Pending() ([]*v1.Pod, error)
}

// Patcher writes the protocol's annotations (the node agent kit's).
type Patcher = allocation.Patcher

// Indexers returns the index IndexerLookup needs for the chip type; add it
// to the node's pod informer before it starts. It holds the non-terminal
// pods that still name a chip of the type (Protocol's Serves).
func Indexers(commonWord string) cache.Indexers {
	serves := Protocol(commonWord).Serves
	return cache.Indexers{indexPendingPrefix + commonWord: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok || allocation.Terminal(pod) || !serves(pod) {
			return nil, nil
		}
		return []string{pending}, nil
	}}
}

// IndexerLookup is a PodLookup over an indexer holding the node's pods
// with Indexers(CommonWord) added.
type IndexerLookup struct {
	Indexer    cache.Indexer
	CommonWord string
}

var _ PodLookup = IndexerLookup{}

// Pending implements PodLookup.
func (l IndexerLookup) Pending() ([]*v1.Pod, error) {
	objs, err := l.Indexer.ByIndex(indexPendingPrefix+l.CommonWord, pending)
	if err != nil {
		return nil, fmt.Errorf("look up the pods waiting for %s: %w", l.CommonWord, err)
	}
	return allocation.Pods(objs), nil
}
