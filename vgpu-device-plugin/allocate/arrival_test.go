package allocate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// gatedPatcher holds the patches of one pod until gate is closed, and says
// when the first one started.
type gatedPatcher struct {
	allocate.Patcher
	pod     string
	gate    <-chan struct{}
	entered func()
}

func (g gatedPatcher) PatchPodAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]string) error {
	if pod.Name == g.pod {
		g.entered()
		<-g.gate
	}
	return g.Patcher.PatchPodAnnotations(ctx, pod, ann)
}

// watchedLookup calls looked after every Allocating lookup once armed.
type watchedLookup struct {
	allocate.PodLookup
	mu     *sync.Mutex
	looked chan<- struct{}
	armed  *bool
}

func (w watchedLookup) Allocating() ([]*v1.Pod, error) {
	pods, err := w.PodLookup.Allocating()
	w.mu.Lock()
	armed := *w.armed
	w.mu.Unlock()
	if armed {
		w.looked <- struct{}{}
	}
	return pods, err
}

// A request is served only with an allocation that was pending when it
// came: one that waits behind another (here, behind pod a's) and then
// finds only a pod bound after it came must not take that pod's
// allocation. That request is for a pod no longer pending (deleted while
// the kubelet admitted it, in the e2e fault campaign); taking b's
// allocation gave its admission b's cards, b's own request the next pod's,
// and so on down the node's queue.
func TestAllocateServesOnlyPodsPendingOnArrival(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	looked := make(chan struct{}, 16)
	var mu sync.Mutex
	armed := false
	e := newEnv(t, func(_ *config.Config, o *allocate.Options) {
		o.Patcher = gatedPatcher{Patcher: o.Patcher, pod: "a", gate: gate, entered: func() { once.Do(func() { close(entered) }) }}
		o.Lookup = watchedLookup{PodLookup: o.Lookup, mu: &mu, looked: looked, armed: &armed}
		o.LivePods = func(context.Context) ([]*v1.Pod, error) { return nil, nil }
	})
	u := e.uuids
	e.add(t, newPod("a").container("c", 1, nil).allocated(entry(u[0], 8000, 0), 100).build())

	first := make(chan error, 1)
	go func() { _, err := e.alloc.Allocate(context.Background(), request(1)); first <- err }()
	<-entered // a is being served, under the agent's lock
	mu.Lock()
	armed = true
	mu.Unlock()
	second := make(chan error, 1)
	go func() { _, err := e.alloc.Allocate(context.Background(), request(1)); second <- err }()
	// The second request has come in while only a was pending once it
	// looked at the pending pods (an agent that does not look when a
	// request comes is given half a second, in real time).
	select {
	case <-looked:
	case <-time.After(500 * time.Millisecond):
	}
	e.add(t, newPod("b").container("c", 1, nil).allocated(entry(u[1], 8000, 0), 200).build())
	close(gate)
	if err := <-first; err != nil {
		t.Fatalf("a's Allocate: %v", err)
	}
	wantCode(t, <-second, codes.NotFound)
	for _, c := range e.rec.Calls() {
		if c.Pod == "b" {
			t.Fatalf("b, bound after the second request came, was served to it: %+v", c)
		}
	}
	resp, err := e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatalf("b's own Allocate: %v", err)
	}
	if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != u[1] {
		t.Errorf("b's own request got %s, want %s", got, u[1])
	}
}
