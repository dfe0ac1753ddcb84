package nodeagent

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/internal/rungroup"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/nodeagent/registrar"
)

// Setup is what a Session needs.
type Setup struct {
	// Name names the agent in logs, like "vGPU node agent".
	Name string
	// Node is this node's name.
	Node   string
	Client kubernetes.Interface
	// LockName is the node lock annotation the scheduler takes for an
	// allocation; the patcher releases it.
	LockName string
	// PodIndexers are the indexes the agent's pod lookup needs.
	PodIndexers cache.Indexers
	// PodHandler, when set, hears of the node's pods as the informer
	// delivers them, and PodListed of each list it makes (an
	// allocation.Journal needs both).
	PodHandler cache.ResourceEventHandler
	PodListed  func()
}

// Session is one run of a node agent: its parts run as one group (the first
// to fail stops the others, see internal/rungroup) until the context ends,
// sharing the node-scoped informers and the patcher. Create it with Start,
// defer Stop, and end with Wait.
type Session struct {
	setup  Setup
	ctx    context.Context
	cancel context.CancelFunc
	group  *rungroup.Group
	stop   sync.Once
	err    error

	// Pods watches the pods bound to the node, with Setup.PodIndexers;
	// Nodes watches the node.
	Pods, Nodes cache.SharedIndexInformer
	// Patcher writes the node's and its pods' annotations.
	Patcher kube.Patcher
}

// Start creates the session's informers; nothing runs yet. The session's
// context ends with ctx or with the first part that fails.
func Start(ctx context.Context, s Setup) (*Session, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &Session{setup: s, ctx: ctx, cancel: cancel, group: rungroup.New(cancel),
		Pods:    kube.NewPodInformer(ctx, s.Client, s.Node, s.PodListed),
		Nodes:   kube.NewNodeInformer(ctx, s.Client, s.Node),
		Patcher: kube.Patcher{Client: s.Client, Node: s.Node, LockName: s.LockName},
	}
	if err := r.Pods.AddIndexers(s.PodIndexers); err != nil {
		cancel()
		return nil, fmt.Errorf("index the pods of node %s: %w", s.Node, err)
	}
	if s.PodHandler != nil {
		if _, err := r.Pods.AddEventHandler(s.PodHandler); err != nil {
			cancel()
			return nil, fmt.Errorf("follow the pods of node %s: %w", s.Node, err)
		}
	}
	return r, nil
}

// Context is the session's context.
func (r *Session) Context() context.Context { return r.ctx }

// Go runs part as a goroutine of the session; its error, prefixed with
// name, stops the session.
func (r *Session) Go(name string, part func() error) { r.group.Start(name, part) }

// StartInformers runs the pod and node informers.
func (r *Session) StartInformers() {
	r.Go("pod informer", func() error { r.Pods.Run(r.ctx.Done()); return nil })
	r.Go("node informer", func() error { r.Nodes.Run(r.ctx.Done()); return nil })
}

// WaitForPods waits until the node's pods are listed; false when the
// session stopped first.
func (r *Session) WaitForPods() bool {
	if !cache.WaitForCacheSync(r.ctx.Done(), r.Pods.HasSynced) {
		klog.InfoS("Stopped before the node's pods were listed", "node", r.setup.Node)
		return false
	}
	return true
}

// StartRegistrar feeds reg the node informer's node and runs it.
func (r *Session) StartRegistrar(reg *registrar.Registrar) error {
	if err := reg.Follow(r.Nodes); err != nil {
		return err
	}
	r.Go("registrar", func() error { reg.Run(r.ctx); return nil })
	return nil
}

// StartDevicePlugin creates the kubelet device plugin and runs it.
func (r *Session) StartDevicePlugin(opts deviceplugin.Options) (*deviceplugin.Plugin, error) {
	dp, err := deviceplugin.New(opts)
	if err != nil {
		return nil, err
	}
	r.Go("device plugin", func() error { return dp.Run(r.ctx) })
	return dp, nil
}

// Wait runs until the session's context ends, then stops it.
func (r *Session) Wait() error {
	<-r.ctx.Done()
	klog.InfoS(r.setup.Name+" stopping", "node", r.setup.Node)
	return r.Stop()
}

// Stop ends the session's context and waits for its parts; it returns the
// first part's failure. It may be called more than once.
func (r *Session) Stop() error {
	r.stop.Do(func() {
		r.cancel()
		r.err = r.group.Wait()
	})
	return r.err
}
