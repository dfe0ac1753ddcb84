package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/monitor"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
	"github.com/vgpushare/vshare/vgpu-device-plugin/register"
)

// Component names the agent: its user agent and the source of its events.
const Component = "vgpu-device-plugin"

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
	client, err := kube.NewClient(o.Kubeconfig, Component)
	if err != nil {
		return err
	}
	if err := allocate.WritePreload(o.CacheDir); err != nil {
		return err
	}
	journal := allocation.NewJournal(allocate.Protocol, 0, nil)
	s, err := nodeagent.Start(ctx, nodeagent.Setup{Name: "vGPU node agent", Node: o.NodeName, Client: client,
		LockName: o.NodeLockName, PodIndexers: allocate.Indexers(), PodHandler: journal, PodListed: journal.Listed})
	if err != nil {
		return err
	}
	defer func() { _ = s.Stop() }() // on an early return; the normal path waits in serve
	return serve(s, o, lib, gpus, client, journal)
}

// serve runs the agent's parts in the session.
func serve(s *nodeagent.Session, o *Options, lib nvml.Interface, gpus []nvidia.GPU, client kubernetes.Interface, journal *allocation.Journal) error {
	ctx := s.Context()
	unit, _ := nvidia.ParseMemoryUnit(o.MemoryUnit)
	st := &state{node: o.NodeName, gpus: gpus, unit: unit}
	snapshot, err := configSource(ctx, o, client)
	if err != nil {
		return err
	}
	st.apply(snapshot())
	s.Go("config", func() error { st.follow(ctx, snapshot); return nil })
	tracker, err := startHealth(s, o, lib, gpus, st)
	if err != nil {
		return err
	}

	s.StartInformers()
	if !s.WaitForPods() {
		return s.Stop()
	}
	lookup := allocate.IndexerLookup{Indexer: s.Pods.GetIndexer()}
	mig := nvidia.NewMIG(lib)
	if err := startRegistrar(s, o, st, tracker, mig); err != nil {
		return err
	}
	pending := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricPendingLookups,
		Help: "kubelet requests (Allocate, GetPreferredAllocation) by where the agent learnt which pods were pending when the request came"},
		[]string{"source"})
	switcher := &monitor.Switcher{CacheDir: o.CacheDir, Pods: lookup}
	alloc, err := newAllocator(s, o, st, tracker, mig, lookup, client, journal, pending, switcher.Kick)
	if err != nil {
		return err
	}
	resource := o.ResourceName
	if resource == "" {
		resource = st.inventory().NVIDIA.ResourceCountName
	}
	if _, err := s.StartDevicePlugin(deviceplugin.Options{
		ResourceName: resource, SocketDir: o.KubeletSocketDir, SocketName: o.SocketName,
		Devices: func() []*pluginapi.Device {
			inv := st.inventory()
			return VirtualDevices(inv, tracker.Healthy, inv.Settings.EnableNUMATopology)
		},
		Changed: st.changed.C, Allocator: alloc, Preferrer: alloc,
	}); err != nil {
		return err
	}
	startMonitor(s, o, lib, st, lookup, switcher, pending)
	klog.InfoS("vGPU node agent running", "node", o.NodeName, "resource", resource, "gpus", len(gpus), "nvml", o.NVML)
	return s.Wait()
}

// startHealth runs the health monitor (and the mock NVML's injected events)
// and forwards health changes to the state.
func startHealth(s *nodeagent.Session, o *Options, lib nvml.Interface, gpus []nvidia.GPU, st *state) (*health.Tracker, error) {
	ctx := s.Context()
	policy, _ := health.ParsePolicy(o.DisableHealthChecks, o.EnableHealthChecks)
	tracker := health.NewTracker()
	s.Go("health forward", func() error { st.forward(ctx, tracker.Changed); return nil })
	uuids := make([]string, len(gpus))
	for i, gpu := range gpus {
		uuids[i] = gpu.UUID
	}
	mon, err := health.NewMonitor(health.MonitorOptions{Lib: lib, UUIDs: uuids, Tracker: tracker, Policy: policy, RecoveryAfter: o.HealthRecovery})
	if err != nil {
		return nil, err
	}
	s.Go("health", func() error { return mon.Run(ctx) })
	if srv, ok := lib.(*nvmlmock.Server); ok && o.MockEventsFile != "" {
		klog.InfoS("Injecting the NVML events written to a file", "env", nvmlmock.EnvEvents, "file", o.MockEventsFile)
		s.Go("mock NVML events", func() error { return srv.FollowEvents(ctx, o.MockEventsFile, mockEventsPoll) })
	}
	return tracker, nil
}

func startRegistrar(s *nodeagent.Session, o *Options, st *state, tracker *health.Tracker, mig *nvidia.MIG) error {
	reg, err := register.New(register.Options{
		Node: o.NodeName, Inventory: st.inventory, Healthy: tracker.Healthy,
		Geometry: func(c nvidia.Card) (string, error) {
			return mig.Geometry(c, st.inventory().NVIDIA.KnownMIGGeometries)
		},
		Changed: st.changed.C, Patcher: s.Patcher, HandshakeInterval: o.HandshakeInterval,
	})
	if err != nil {
		return err
	}
	return s.StartRegistrar(reg)
}

// newAllocator builds the Allocate side: the allocator, with the allocation
// keys when --allocation-key-file is set.
func newAllocator(s *nodeagent.Session, o *Options, st *state, tracker *health.Tracker, mig *nvidia.MIG,
	lookup allocate.IndexerLookup, client kubernetes.Interface, journal *allocation.Journal, pending *prometheus.CounterVec,
	regionCreated func()) (*allocate.Allocator, error) {
	aopts := allocate.Options{
		Node: o.NodeName, Inventory: st.inventory, Healthy: tracker.Healthy, Lookup: lookup, Patcher: s.Patcher,
		MIG: migNotifier{mig: mig, s: st}, LibvgpuHostPath: o.LibvgpuHostPath, CacheHostDir: o.CacheDir, MPSHostRoot: o.MPSRoot,
		PassDeviceSpecs: o.PassDeviceSpecs, StaleAfter: o.StaleAfter, InformerWait: o.InformerWait,
		SchedulerNames: o.SchedulerNames, Events: kube.NewEventRecorder(client, Component, o.NodeName),
		LivePods: kube.NodePods(client, o.NodeName), Journal: journal, NodeLockName: o.NodeLockName,
		CountPending:  func(source string) { pending.WithLabelValues(source).Inc() },
		RegionCreated: regionCreated,
	}
	if o.AllocationKeyFile != "" {
		keys, err := allocation.LoadKeys(o.AllocationKeyFile)
		if err != nil {
			return nil, err
		}
		aopts.Keys = keys
	}
	return allocate.New(aopts)
}

// MetricPendingLookups counts kubelet requests by where the agent learnt
// which pods were pending (label source: allocate.PendingFrom*,
// allocate.PendingUnknown).
const MetricPendingLookups = "vshare_agent_pending_lookups_total"

// startMonitor runs the metrics exporter (unless --metrics-address is
// empty), and the cleaner, utilisation switch and task-priority relay:
// deleted pods' regions are removed, containers alone on their card run
// unthrottled (libvgpu's utilisation switch), and low-priority containers
// learn when a high-priority one on their card is launching, with or
// without the exporter, which also serves the agent's own collectors.
func startMonitor(s *nodeagent.Session, o *Options, lib nvml.Interface, st *state, lookup allocate.IndexerLookup,
	switcher *monitor.Switcher, agent ...prometheus.Collector) {
	ctx := s.Context()
	if o.MetricsAddress != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(monitor.NewCollector(lib, st.inventory, lookup, o.CacheDir))
		reg.MustRegister(agent...)
		s.Go("metrics", func() error { return monitor.Serve(ctx, o.MetricsAddress, reg, nil) })
	}
	cleaner := &monitor.Cleaner{CacheDir: o.CacheDir, Pods: lookup}
	s.Go("cleaner", func() error { cleaner.Run(ctx, o.CleanInterval); return nil })
	s.Go("util switch", func() error { switcher.Run(ctx, nil, monitor.DefaultSwitchInterval); return nil })
	prio := &monitor.Prioritizer{CacheDir: o.CacheDir, Pods: lookup}
	s.Go("task priority", func() error { prio.Run(ctx, nil, monitor.DefaultPriorityInterval); return nil })
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
	return nvmlmock.New(machine, nvmlmock.WithSeed(o.NodeName))
}

// configSource returns the device configuration: a file read once, or the
// ConfigMap watched by a config.Loader.
func configSource(ctx context.Context, o *Options, client kubernetes.Interface) (func() (*config.Config, uint64), error) {
	if o.ConfigFile != "" {
		cfg, err := o.ReadConfigFile()
		if err != nil {
			return nil, err
		}
		return func() (*config.Config, uint64) { return cfg, 1 }, nil
	}
	loader := config.NewLoader(config.LoaderOptions{Client: client})
	if err := loader.Start(ctx, o.ConfigMapNamespace, o.ConfigMapName); err != nil {
		return nil, err
	}
	return loader.Snapshot, nil
}
