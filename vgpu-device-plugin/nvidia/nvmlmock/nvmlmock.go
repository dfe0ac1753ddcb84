package nvmlmock

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/uuid"
)

// Machines lists the mock machines New accepts.
func Machines() []string {
	return []string{"dgxa100", "dgxb200", "dgxh100", "dgxh200", MachinePCIeH100, MachinePCIeA30}
}

// The mock machines this package builds itself on go-nvml's mock types.
const (
	// MachinePCIeH100 is 8 x H100 PCIe on two NUMA nodes with NVLink
	// bridges between pairs (see pcieH100Topology).
	MachinePCIeH100 = "pcie-h100x8"
	// MachinePCIeA30 is 4 x A30 PCIe on two NUMA nodes without NVLink
	// (see pcieA30Topology).
	MachinePCIeA30 = "pcie-a30x4"
)

// h100PCIe is the H100 PCIe card. go-nvml ships no config for it: it is
// the H100 SXM5 config (same GH100 chip, same MIG profiles) with the PCIe
// card's product name, PCI device ID 0x2331 and 80 GB of HBM2e.
func h100PCIe() gpus.Config {
	c := gpus.H100_SXM5_80GB
	c.Name = "NVIDIA H100 PCIe"
	c.PciDeviceId = 0x233110DE
	return c
}

// Option configures New.
type Option func(*newOptions)

type newOptions struct{ seed string }

// WithSeed derives the GPUs' UUIDs from seed (the agent passes its node
// name) as well as the machine, so that simulated nodes of one machine do
// not repeat each other's UUIDs, as no real cluster does.
func WithSeed(seed string) Option { return func(o *newOptions) { o.seed = seed } }

// maxMIGDevices is the most MIG devices one GPU exposes (7 slices).
const maxMIGDevices = 7

// supportedEvents are the event types every mock GPU reports as supported.
const supportedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError

// Server is a go-nvml mock server with the calls the agent needs filled in.
// It implements nvml.Interface.
type Server struct {
	*server.Server

	mu      sync.Mutex
	sets    []*eventSet
	migDevs map[migKey]*mock.Device
	util    map[string]nvml.Utilization
	used    map[string]uint64 // bytes
}

type migKey struct {
	parent string
	gi, ci uint32
}

// eventSet is one EventSetCreate result.
type eventSet struct {
	mock.EventSet
	ch         chan nvml.EventData
	registered map[string]uint64 // device UUID -> event types
}

// New returns the mock server of the named machine ("dgxa100", ...), with
// its PCIe, NUMA and NVLink topology (topology.go).
func New(machine string, opts ...Option) (*Server, error) {
	var o newOptions
	for _, opt := range opts {
		opt(&o)
	}
	var base *server.Server
	var topo topology
	switch machine {
	case "dgxa100":
		base, topo = dgxa100.New(), dgxA100Topology()
	case "dgxh100":
		base, topo = dgxh100.New(), dgxHopperTopology()
	case "dgxh200":
		base, topo = dgxh200.New(), dgxHopperTopology()
	case "dgxb200":
		base, topo = dgxb200.New(), dgxHopperTopology()
	case MachinePCIeH100:
		base = dgxa100.NewWithGPUs(gpus.Multiple(8, h100PCIe())...)
		topo = pcieH100Topology()
	case MachinePCIeA30:
		base = dgxa100.NewWithGPUs(gpus.Multiple(4, gpus.A30_PCIE_24GB)...)
		topo = pcieA30Topology()
	default:
		return nil, fmt.Errorf("mock machine %q: want one of %s", machine, strings.Join(Machines(), ", "))
	}
	s := &Server{
		Server:  base,
		migDevs: map[migKey]*mock.Device{},
		util:    map[string]nvml.Utilization{},
		used:    map[string]uint64{},
	}
	s.EventSetCreateFunc = s.eventSetCreate
	for i, d := range base.Devices {
		dev := d.(*server.Device)
		name := fmt.Sprintf("%s/%d", machine, i)
		if o.seed != "" {
			name = fmt.Sprintf("%s/%s/%d", o.seed, machine, i)
		}
		dev.UUID = "GPU-" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String()
		s.complete(dev)
	}
	s.applyTopology(topo)
	return s, nil
}

// UUIDs returns the GPUs' UUIDs in index order.
func (s *Server) UUIDs() []string {
	out := make([]string, len(s.Devices))
	for i, d := range s.Devices {
		out[i] = d.(*server.Device).UUID
	}
	return out
}

// InjectEvent delivers an NVML event (for example nvml.EventTypeXidCriticalError
// with the Xid as data) for the GPU to every event set it is registered with
// for that type. It reports how many sets received it.
func (s *Server) InjectEvent(gpuUUID string, eventType, data uint64) (int, error) {
	dev, ret := s.DeviceGetHandleByUUID(gpuUUID)
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("inject event for %s: %w", gpuUUID, ret)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, set := range s.sets {
		if set.registered[gpuUUID]&eventType == 0 {
			continue
		}
		select {
		case set.ch <- nvml.EventData{Device: dev, EventType: eventType, EventData: data}:
			n++
		default:
			return n, fmt.Errorf("inject event for %s: event set queue full", gpuUUID)
		}
	}
	return n, nil
}

// SetUtilization sets what GetUtilizationRates reports for the GPU.
func (s *Server) SetUtilization(gpuUUID string, gpu, memory uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.util[gpuUUID] = nvml.Utilization{Gpu: gpu, Memory: memory}
}

// SetMemoryUsed sets the used memory GetMemoryInfo reports for the GPU.
func (s *Server) SetMemoryUsed(gpuUUID string, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used[gpuUUID] = bytes
}

func (s *Server) eventSetCreate() (nvml.EventSet, nvml.Return) {
	set := &eventSet{ch: make(chan nvml.EventData, 64), registered: map[string]uint64{}}
	set.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		select {
		case e := <-set.ch:
			return e, nvml.SUCCESS
		case <-t.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	set.FreeFunc = func() nvml.Return {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.sets = slices.DeleteFunc(s.sets, func(x *eventSet) bool { return x == set })
		return nvml.SUCCESS
	}
	s.mu.Lock()
	s.sets = append(s.sets, set)
	s.mu.Unlock()
	return set, nvml.SUCCESS
}

// complete fills in the device calls the mock leaves unimplemented.
func (s *Server) complete(dev *server.Device) {
	dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return supportedEvents, nvml.SUCCESS }
	dev.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		es, ok := set.(*eventSet)
		if !ok || types&^supportedEvents != 0 {
			return nvml.ERROR_NOT_SUPPORTED
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		es.registered[dev.UUID] |= types
		return nvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.util[dev.UUID], nvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := dev.MemoryInfo
		m.Used = min(s.used[dev.UUID], m.Total)
		m.Free = m.Total - m.Used
		return m, nvml.SUCCESS
	}
	dev.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return maxMIGDevices, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		devs := s.migDevices(dev)
		if i < 0 || i >= len(devs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return devs[i], nvml.SUCCESS
	}
}

// migDevices returns the MIG devices of a GPU: one per compute instance,
// ordered by GPU instance and compute instance ID.
func (s *Server) migDevices(dev *server.Device) []nvml.Device {
	type pair struct {
		gi *server.GpuInstance
		ci *server.ComputeInstance
	}
	var pairs []pair
	dev.RLock()
	for gi := range dev.GpuInstances {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			pairs = append(pairs, pair{gi, ci})
		}
		gi.RUnlock()
	}
	dev.RUnlock()
	sort.Slice(pairs, func(a, b int) bool {
		return cmp.Or(cmp.Compare(pairs[a].gi.Info.Id, pairs[b].gi.Info.Id), cmp.Compare(pairs[a].ci.Info.Id, pairs[b].ci.Info.Id)) < 0
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]nvml.Device, 0, len(pairs))
	for _, p := range pairs {
		key := migKey{parent: dev.UUID, gi: p.gi.Info.Id, ci: p.ci.Info.Id}
		m, ok := s.migDevs[key]
		if !ok {
			m = newMIGDevice(dev, key, p.gi)
			s.migDevs[key] = m
		}
		out = append(out, m)
	}
	return out
}

// newMIGDevice builds the handle of one MIG device.
func newMIGDevice(parent *server.Device, key migKey, gi *server.GpuInstance) *mock.Device {
	id := "MIG-" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprintf("%s/%d/%d", key.parent, key.gi, key.ci))).String()
	memMB := gi.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)].MemorySizeMB
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return id, nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return int(key.gi), nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return int(key.ci), nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: memMB << 20, Free: memMB << 20}, nvml.SUCCESS
		},
	}
}
