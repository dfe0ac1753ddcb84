package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/internal/rungroup"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/kube"
	"github.com/vgpushare/vshare/vgpu-device-plugin/monitor"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
	"github.com/vgpushare/vshare/vgpu-device-plugin/plugin"
	"github.com/vgpushare/vshare/vgpu-device-plugin/register"
)

// mockEventsPoll is how often the mock NVML looks for new lines in
// Options.MockEventsFile.
const mockEventsPoll = 200 * time.Millisecond

// Run runs the agent until ctx ends or a part fails.
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	lib, err := openNVML(o)
	if err != nil {
		return err
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("initialise NVML (--nvml=%s): %w", o.NVML, ret)
	}
	defer lib.Shutdown()
	gpus, err := nvidia.Discover(lib)
	if err != nil {
		return fmt.Errorf("discover GPUs: %w", err)
	}
	client, err := kubeClient(o.Kubeconfig)
	if err != nil {
		return err
	}
	unit, _ := nvidia.ParseMemoryUnit(o.MemoryUnit)
	policy, _ := health.ParsePolicy(o.DisableHealthChecks, o.EnableHealthChecks)
	if err := allocate.WritePreload(o.CacheDir); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	g := rungroup.New(cancel)
	defer func() {
		cancel()
		_ = g.Wait() // on an early return; the normal path waits below
	}()

	st := &state{node: o.NodeName, gpus: gpus, unit: unit}
	snapshot, err := configSource(ctx, o, client)
	if err != nil {
		return err
	}
	st.apply(snapshot())
	g.Start("config", func() error { st.follow(ctx, snapshot); return nil })

	tracker := health.NewTracker()
	g.Start("health forward", func() error { st.forward(ctx, tracker.Changed); return nil })
	uuids := make([]string, len(gpus))
	for i, gpu := range gpus {
		uuids[i] = gpu.UUID
	}
	mon, err := health.NewMonitor(health.MonitorOptions{Lib: lib, UUIDs: uuids, Tracker: tracker, Policy: policy, RecoveryAfter: o.HealthRecovery})
	if err != nil {
		return err
	}
	g.Start("health", func() error { return mon.Run(ctx) })
	if srv, ok := lib.(*nvmlmock.Server); ok && o.MockEventsFile != "" {
		klog.InfoS("Injecting the NVML events written to a file", "env", nvmlmock.EnvEvents, "file", o.MockEventsFile)
		g.Start("mock NVML events", func() error { return srv.FollowEvents(ctx, o.MockEventsFile, mockEventsPoll) })
	}

	podInf := kube.NewPodInformer(ctx, client, o.NodeName)
	nodeInf := kube.NewNodeInformer(ctx, client, o.NodeName)
	g.Start("pod informer", func() error { podInf.Run(ctx.Done()); return nil })
	g.Start("node informer", func() error { nodeInf.Run(ctx.Done()); return nil })
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced) {
		klog.InfoS("Stopped before the node's pods were listed", "node", o.NodeName)
		cancel()
		return g.Wait()
	}
	lookup := allocate.IndexerLookup{Indexer: podInf.GetIndexer()}
	patcher := kube.Patcher{Client: client, Node: o.NodeName, LockName: o.NodeLockName}
	mig := nvidia.NewMIG(lib)

	if err := startRegistrar(ctx, g, o, st, tracker, mig, patcher, nodeInf); err != nil {
		return err
	}
	aopts := allocate.Options{
		Node: o.NodeName, Inventory: st.inventory, Healthy: tracker.Healthy, Lookup: lookup, Patcher: patcher,
		MIG: migNotifier{mig: mig, s: st}, LibvgpuHostPath: o.LibvgpuHostPath, CacheHostDir: o.CacheDir,
		PassDeviceSpecs: o.PassDeviceSpecs, StaleAfter: o.StaleAfter, InformerWait: o.InformerWait,
		SchedulerNames: o.SchedulerNames, Events: eventRecorder(client, o.NodeName),
		LivePods: kube.NodePods(client, o.NodeName),
	}
	if o.AllocationKeyFile != "" {
		keys, err := allocsig.OpenFile(o.AllocationKeyFile)
		if err != nil {
			return err
		}
		aopts.Keys = keys.Keys
		ring, _ := keys.Keys()
		klog.InfoS("Serving only signed allocations", "keyFile", o.AllocationKeyFile, "keys", ring.IDs())
	}
	alloc, err := allocate.New(aopts)
	if err != nil {
		return err
	}
	resource := o.ResourceName
	if resource == "" {
		resource = st.inventory().NVIDIA.ResourceCountName
	}
	dp, err := plugin.New(plugin.Options{
		ResourceName: resource, SocketDir: o.KubeletSocketDir, SocketName: o.SocketName,
		Devices: func() []*pluginapi.Device {
			inv := st.inventory()
			return plugin.VirtualDevices(inv, tracker.Healthy, inv.Settings.EnableNUMATopology)
		},
		Changed: st.changed.C, Allocator: alloc,
	})
	if err != nil {
		return err
	}
	g.Start("device plugin", func() error { return dp.Run(ctx) })

	if o.MetricsAddress != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(monitor.NewCollector(lib, st.inventory, lookup, o.CacheDir))
		g.Start("metrics", func() error { return monitor.Serve(ctx, o.MetricsAddress, reg, nil) })
	}
	// Deleted pods' regions are removed, and containers alone on their card
	// run unthrottled (libvgpu's utilisation switch), with or without the
	// exporter.
	cleaner := &monitor.Cleaner{CacheDir: o.CacheDir, Pods: lookup}
	g.Start("cleaner", func() error { cleaner.Run(ctx, o.CleanInterval); return nil })
	switcher := &monitor.Switcher{CacheDir: o.CacheDir, Pods: lookup}
	g.Start("util switch", func() error { switcher.Run(ctx, nil, monitor.DefaultSwitchInterval); return nil })
	klog.InfoS("vGPU node agent running", "node", o.NodeName, "resource", resource, "gpus", len(gpus), "nvml", o.NVML)
	<-ctx.Done()
	klog.InfoS("vGPU node agent stopping", "node", o.NodeName)
	cancel()
	return g.Wait()
}

func startRegistrar(ctx context.Context, g *rungroup.Group, o *Options, st *state, tracker *health.Tracker, mig *nvidia.MIG,
	patcher kube.Patcher, nodeInf cache.SharedIndexInformer) error {
	reg, err := register.New(register.Options{
		Node: o.NodeName, Inventory: st.inventory, Healthy: tracker.Healthy,
		Geometry: func(c nvidia.Card) (string, error) {
			return mig.Geometry(c, st.inventory().NVIDIA.KnownMIGGeometries)
		},
		Changed: st.changed.C, Patcher: patcher, HandshakeInterval: o.HandshakeInterval,
	})
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
	g.Start("registrar", func() error { reg.Run(ctx); return nil })
	return nil
}

// openNVML returns the NVML implementation --nvml selects.
func openNVML(o *Options) (nvml.Interface, error) {
	machine, err := o.mockMachine()
	if err != nil {
		return nil, err
	}
	if machine == "" {
		return nvml.New(), nil
	}
	klog.InfoS("Using go-nvml's mock NVML", "machine", machine)
	return nvmlmock.New(machine)
}

// kubeClient builds a client from the kubeconfig, or in-cluster.
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig=%q): %w", kubeconfig, err)
	}
	cfg.UserAgent = "vgpu-device-plugin"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// configSource returns the device configuration: a file read once, or the
// ConfigMap watched by a config.Loader.
func configSource(ctx context.Context, o *Options, client kubernetes.Interface) (func() (*config.Config, uint64), error) {
	if o.ConfigFile != "" {
		data, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
		}
		cfg, err := config.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
		}
		return func() (*config.Config, uint64) { return cfg, 1 }, nil
	}
	loader := config.NewLoader(config.LoaderOptions{Client: client})
	if err := loader.Start(ctx, o.ConfigMapNamespace, o.ConfigMapName); err != nil {
		return nil, err
	}
	return loader.Snapshot, nil
}

// eventRecorder records events on behalf of the agent on node.
func eventRecorder(client kubernetes.Interface, node string) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "vgpu-device-plugin", Host: node})
}
