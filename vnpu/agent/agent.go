package agent

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/rungroup"
	"github.com/vgpushare/vshare/protocol/ascend"
	"github.com/vgpushare/vshare/vgpu-device-plugin/kube"
	"github.com/vgpushare/vshare/vgpu-device-plugin/plugin"
)

// Run runs the agent until ctx ends or a part fails.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	client, err := kubeClient(o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(ctx, o, client)
	if err != nil {
		return err
	}
	spec, err := o.spec(cfg)
	if err != nil {
		return err
	}
	inv, err := NewInventory(spec)
	if err != nil {
		return err
	}
	return Serve(ctx, ServeOptions{Options: o, Client: client, Inventory: inv})
}

// ServeOptions are what Serve needs: the options, a client and the chips.
type ServeOptions struct {
	*Options
	Client    kubernetes.Interface
	Inventory *Inventory
}

// Serve runs the registrar, the pod and node informers and the device
// plugin for the inventory until ctx ends or a part fails.
func Serve(ctx context.Context, s ServeOptions) error {
	o, inv := s.Options, s.Inventory
	ctx, cancel := context.WithCancel(ctx)
	g := rungroup.New(cancel)
	defer func() {
		cancel()
		_ = g.Wait() // on an early return; the normal path waits below
	}()

	cw := inv.Entry().CommonWord
	podInf := kube.NewPodInformer(ctx, s.Client, o.NodeName)
	if err := podInf.AddIndexers(Indexers(cw)); err != nil {
		return fmt.Errorf("index the pods of node %s: %w", o.NodeName, err)
	}
	nodeInf := kube.NewNodeInformer(ctx, s.Client, o.NodeName)
	patcher := kube.Patcher{Client: s.Client, Node: o.NodeName, LockName: ascend.NodeLockName}
	reg, err := NewRegistrar(RegistrarOptions{Node: o.NodeName, Inventory: inv, Patcher: patcher, HandshakeInterval: o.HandshakeInterval})
	if err != nil {
		return err
	}
	observe := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			reg.ObserveNode(n)
		}
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return fmt.Errorf("watch node %s: %w", o.NodeName, err)
	}
	g.Start("pod informer", func() error { podInf.Run(ctx.Done()); return nil })
	g.Start("node informer", func() error { nodeInf.Run(ctx.Done()); return nil })
	g.Start("registrar", func() error { reg.Run(ctx); return nil })
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced) {
		klog.InfoS("Stopped before the node's pods were listed", "node", o.NodeName)
		cancel()
		return g.Wait()
	}

	alloc, err := NewAllocator(AllocatorOptions{Node: o.NodeName, Inventory: inv,
		Lookup: IndexerLookup{Indexer: podInf.GetIndexer(), CommonWord: cw}, Patcher: patcher,
		HookDir: o.HookDir, StaleAfter: o.StaleAfter, InformerWait: o.InformerWait})
	if err != nil {
		return err
	}
	never := make(chan struct{}) // the simulated chips never change
	dp, err := plugin.New(plugin.Options{
		ResourceName: inv.Entry().ResourceName, SocketDir: o.KubeletSocketDir, SocketName: o.socketName(),
		Devices: inv.Devices, Changed: func() <-chan struct{} { return never }, Allocator: alloc,
	})
	if err != nil {
		return err
	}
	g.Start("device plugin", func() error { return dp.Run(ctx) })
	klog.InfoS("Simulated Ascend node agent running", "node", o.NodeName, "chip", cw,
		"resource", inv.Entry().ResourceName, "chips", len(inv.Chips()), "splitCount", inv.SplitCount(),
		"hamiCore", inv.HAMiCore(), "socket", dp.SocketPath())
	<-ctx.Done()
	klog.InfoS("Simulated Ascend node agent stopping", "node", o.NodeName)
	cancel()
	return g.Wait()
}

// kubeClient builds a client from the kubeconfig, or in-cluster.
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig=%q): %w", kubeconfig, err)
	}
	cfg.UserAgent = "vnpu-agent"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// loadConfig reads --config-file, or else the ConfigMap once; an absent
// ConfigMap means the built-in defaults.
func loadConfig(ctx context.Context, o *Options, client kubernetes.Interface) (*config.Config, error) {
	if o.ConfigFile != "" {
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
		}
		cfg, err := config.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
		}
		return cfg, nil
	}
	cm, err := client.CoreV1().ConfigMaps(o.ConfigMapNamespace).Get(ctx, o.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		klog.InfoS("No device ConfigMap; using the built-in vnpus catalogue", "configMap", klog.KRef(o.ConfigMapNamespace, o.ConfigMapName))
		return config.Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", o.ConfigMapNamespace, o.ConfigMapName, err)
	}
	return config.FromConfigMap(cm)
}
