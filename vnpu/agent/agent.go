package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// Run runs the agent until ctx ends or a part fails.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	client, err := kube.NewClient(o.Kubeconfig, "vnpu-agent")
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
	cw := inv.Entry().CommonWord
	// The journal hears the informer's events from its first list, so it
	// can say what was pending when a request came (allocation.Journal).
	journal := allocation.NewJournal(Protocol(cw), 0, nil)
	run, err := nodeagent.Start(ctx, nodeagent.Setup{Name: "Simulated Ascend node agent", Node: o.NodeName, Client: s.Client,
		LockName: ascendproto.NodeLockName, PodIndexers: Indexers(cw), PodHandler: journal, PodListed: journal.Listed})
	if err != nil {
		return err
	}
	defer func() { _ = run.Stop() }() // on an early return; the normal path waits below
	reg, err := NewRegistrar(RegistrarOptions{Node: o.NodeName, Inventory: inv, Patcher: run.Patcher, HandshakeInterval: o.HandshakeInterval})
	if err != nil {
		return err
	}
	run.StartInformers()
	if err := run.StartRegistrar(reg); err != nil {
		return err
	}
	if !run.WaitForPods() {
		return run.Stop()
	}

	alloc, err := NewAllocator(AllocatorOptions{Node: o.NodeName, Inventory: inv,
		Lookup: IndexerLookup{Indexer: run.Pods.GetIndexer(), CommonWord: cw}, Patcher: run.Patcher,
		HookDir: o.HookDir, StaleAfter: o.StaleAfter, InformerWait: o.InformerWait,
		LivePods: kube.NodePods(s.Client, o.NodeName), Journal: journal,
		CountPending: func(source string) {
			klog.V(4).InfoS("Ascend request arrived", "node", o.NodeName, "chip", cw, "pendingFrom", source)
		}})
	if err != nil {
		return err
	}
	dp, err := run.StartDevicePlugin(deviceplugin.Options{ // the simulated chips never change
		ResourceName: inv.Entry().ResourceName, SocketDir: o.KubeletSocketDir, SocketName: o.socketName(),
		Devices: inv.Devices, Allocator: alloc,
	})
	if err != nil {
		return err
	}
	klog.InfoS("Simulated Ascend node agent running", "node", o.NodeName, "chip", cw,
		"resource", inv.Entry().ResourceName, "chips", len(inv.Chips()), "splitCount", inv.SplitCount(),
		"hamiCore", inv.HAMiCore(), "socket", dp.SocketPath())
	return run.Wait()
}

// loadConfig reads --config-file, or else the ConfigMap once; an absent
// ConfigMap means the built-in defaults.
func loadConfig(ctx context.Context, o *Options, client kubernetes.Interface) (*config.Config, error) {
	if o.ConfigFile != "" {
		return o.ReadConfigFile()
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
