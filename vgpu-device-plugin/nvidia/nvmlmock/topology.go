package nvmlmock

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// topology is the hardware a mock machine's NVML describes beyond the GPUs
// themselves: where each card sits on the PCIe tree and the NUMA nodes, and
// its NVLinks. go-nvml's mock servers model none of it; the values below
// are the real machines' where the machine is a real one (cited per
// machine).
type topology struct {
	// bus is each GPU's PCI bus number (domain 0, device 0, function 0).
	bus []uint32
	// numa is each GPU's NUMA node (the node its memory affinity names).
	numa []int
	// nodes is the machine's NUMA node count and cpusPerNode the physical
	// cores of each; node n has cores [n*c, n*c+c) and their hyperthread
	// siblings [nodes*c + n*c, ...), as Linux numbers them on these
	// machines (DGX A100: NUMA 3 is CPUs 48-63,176-191).
	nodes, cpusPerNode int
	// level is the PCIe common ancestor of two different GPUs.
	level func(a, b int) nvml.GpuTopologyLevel
	// maxLinks is the NVLinks the GPU model has; GetNvLinkState answers
	// ERROR_INVALID_ARGUMENT for link numbers at or beyond it and, when it
	// is 0, ERROR_NOT_SUPPORTED for every link (no NVLink on the card).
	maxLinks int
	// links are each GPU's active NVLinks: the remote end of link i.
	links [][]remote
}

// remote is the far end of one NVLink: a GPU (gpu >= 0) or NVSwitch sw.
type remote struct {
	gpu int
	sw  int
}

// switchBus is the PCI bus of NVSwitch sw, above every GPU's bus number
// used here, so no remote PCI info of a switch names a GPU.
func switchBus(sw int) uint32 { return 0xf0 + uint32(sw) }

// pciInfo is the PCI info NVML reports for a device on bus (domain 0).
// NVML writes the bus ID as "%08x:%02x:%02x.0" and the legacy one with a
// 4-digit domain (nvml.h, nvmlPciInfo_t).
func pciInfo(bus, deviceID uint32) nvml.PciInfo {
	p := nvml.PciInfo{Bus: bus, PciDeviceId: deviceID}
	putString(p.BusId[:], fmt.Sprintf("%08x:%02x:00.0", 0, bus))
	putString(p.BusIdLegacy[:], fmt.Sprintf("%04x:%02x:00.0", 0, bus))
	return p
}

func putString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// viaSwitches connects every GPU to every NVSwitch with perSwitch links
// each, in switch order, as the DGX machines are wired.
func viaSwitches(gpus, switches, perSwitch int) [][]remote {
	out := make([][]remote, gpus)
	for g := range out {
		for sw := 0; sw < switches; sw++ {
			for k := 0; k < perSwitch; k++ {
				out[g] = append(out[g], remote{gpu: -1, sw: sw})
			}
		}
	}
	return out
}

// bridged connects GPUs 2k and 2k+1 with n NVLinks each (NVLink bridges).
func bridged(gpus, n int) [][]remote {
	out := make([][]remote, gpus)
	for g := range out {
		for k := 0; k < n; k++ {
			out[g] = append(out[g], remote{gpu: g ^ 1, sw: -1})
		}
	}
	return out
}

// sameNUMA returns a level function: within for two GPUs on one NUMA node,
// SYSTEM otherwise (the path crosses the inter-node interconnect, which
// nvidia-smi topo -m shows as SYS).
func sameNUMA(numa []int, within func(a, b int) nvml.GpuTopologyLevel) func(a, b int) nvml.GpuTopologyLevel {
	return func(a, b int) nvml.GpuTopologyLevel {
		if numa[a] != numa[b] {
			return nvml.TOPOLOGY_SYSTEM
		}
		return within(a, b)
	}
}

func constLevel(l nvml.GpuTopologyLevel) func(a, b int) nvml.GpuTopologyLevel {
	return func(int, int) nvml.GpuTopologyLevel { return l }
}

// dgxA100Topology is the DGX A100: 8 A100 SXM4 on 6 NVSwitches with 2 of
// each GPU's 12 NVLinks to each switch (NV12 between every pair in
// `nvidia-smi topo -m`); 2 AMD EPYC 7742 in NPS4 mode, so 8 NUMA nodes of
// 16 cores, with GPU0,1 on NUMA 3, GPU2,3 on 1, GPU4,5 on 7 and GPU6,7 on
// 5, each pair behind one PCIe switch tree (PXB to its NICs) and the pairs
// SYS apart. The NUMA and CPU affinity columns are those a DGX A100's
// `nvidia-smi topo -m` prints (public DGX A100 notes; GPU0 48-63,176-191
// NUMA 3); the bus IDs are the DGX A100's 07, 0f, 47, 4e, 87, 90, b7, bd.
func dgxA100Topology() topology {
	numa := []int{3, 3, 1, 1, 7, 7, 5, 5}
	return topology{
		bus:   []uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd},
		numa:  numa,
		nodes: 8, cpusPerNode: 16,
		level:    sameNUMA(numa, constLevel(nvml.TOPOLOGY_MULTIPLE)),
		maxLinks: 12,
		links:    viaSwitches(8, 6, 2),
	}
}

// dgxHopperTopology is the DGX H100/H200 and B200 shape: 8 GPUs each with
// 18 NVLinks to the NVSwitches (NV18 between every pair), 2 Intel Xeon
// 8480C sockets of 56 cores and one NUMA node each, GPUs 0-3 on NUMA 0
// (CPUs 0-55,112-167) and 4-7 on NUMA 1 (56-111,168-223), each GPU behind
// its own PCIe switch (NODE within a socket, SYS across), as published
// `nvidia-smi topo -m` outputs of DGX H100 and B200 machines show. The
// switch count (4 on DGX H100, 2 on DGX B200) does not change what NVML
// reports per GPU pair; 4 switches are modelled.
func dgxHopperTopology() topology {
	numa := []int{0, 0, 0, 0, 1, 1, 1, 1}
	links := make([][]remote, 8)
	for g := range links {
		for k := 0; k < 18; k++ {
			links[g] = append(links[g], remote{gpu: -1, sw: k % 4})
		}
	}
	return topology{
		bus:   []uint32{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf},
		numa:  numa,
		nodes: 2, cpusPerNode: 56,
		level:    sameNUMA(numa, constLevel(nvml.TOPOLOGY_NODE)),
		maxLinks: 18,
		links:    links,
	}
}

// pcieH100Topology is an 8 x H100 PCIe server: two sockets (NUMA 0: GPUs
// 0-3, NUMA 1: GPUs 4-7), one PCIe switch per socket holding its four
// cards (PIX between them), and NVLink bridges between the pairs 0-1,
// 2-3, 4-5, 6-7. An H100 PCIe pair joined by its three bridges has
// 600 GB/s of NVLink (NVIDIA H100 PCIe product brief, PB-11133-001), at
// NVLink4's 50 GB/s per link (18 links = 900 GB/s on H100 SXM): 12 links.
func pcieH100Topology() topology {
	numa := []int{0, 0, 0, 0, 1, 1, 1, 1}
	return topology{
		bus:   []uint32{0x18, 0x19, 0x1a, 0x1b, 0x98, 0x99, 0x9a, 0x9b},
		numa:  numa,
		nodes: 2, cpusPerNode: 32,
		level:    sameNUMA(numa, constLevel(nvml.TOPOLOGY_SINGLE)),
		maxLinks: 18,
		links:    bridged(8, 12),
	}
}

// pcieA30Topology is a 4 x A30 PCIe server without NVLink bridges: the
// A30 has NVLink (4 links for its bridge), but with no bridge fitted every
// link is down (FEATURE_DISABLED). Two cards per socket, each pair on a
// PCIe switch (PIX).
func pcieA30Topology() topology {
	numa := []int{0, 0, 1, 1}
	return topology{
		bus:   []uint32{0x3b, 0x3c, 0xaf, 0xb0},
		numa:  numa,
		nodes: 2, cpusPerNode: 24,
		level:    sameNUMA(numa, constLevel(nvml.TOPOLOGY_SINGLE)),
		maxLinks: 4,
		links:    make([][]remote, 4),
	}
}

// cpuSet returns the bitmask (size words of 64 bits) of node n's CPUs.
func (t *topology) cpuSet(n, size int) []uint {
	out := make([]uint, size)
	set := func(cpu int) {
		if w := cpu / 64; w < size {
			out[w] |= 1 << uint(cpu%64)
		}
	}
	c := t.cpusPerNode
	for i := 0; i < c; i++ {
		set(n*c + i)
		set(t.nodes*c + n*c + i)
	}
	return out
}

// applyTopology installs the topology calls on the machine's devices.
// GetNumaNodeId answers ERROR_NOT_SUPPORTED: NVML documents it only for
// platforms where the GPUs are NUMA nodes themselves (Grace coherent
// memory), which none of these x86 machines is; their NUMA node comes from
// the memory affinity, as a real driver reports it.
func (s *Server) applyTopology(t topology) {
	devs := make([]*server.Device, len(s.Devices))
	for i, d := range s.Devices {
		devs[i] = d.(*server.Device)
	}
	byBus := map[uint32]*server.Device{}
	for i, dev := range devs {
		i, dev := i, dev
		info := pciInfo(t.bus[i], dev.Config.PciDeviceId)
		dev.PciBusID = fmt.Sprintf("%08x:%02x:00.0", 0, t.bus[i])
		byBus[t.bus[i]] = dev
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return info, nvml.SUCCESS }
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetMemoryAffinityFunc = func(size int, scope nvml.AffinityScope) ([]uint, nvml.Return) {
			if size <= 0 || scope != nvml.AFFINITY_SCOPE_NODE && scope != nvml.AFFINITY_SCOPE_SOCKET {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			out := make([]uint, size)
			if w := t.numa[i] / 64; w < size {
				out[w] = 1 << uint(t.numa[i]%64)
			}
			return out, nvml.SUCCESS
		}
		dev.GetCpuAffinityFunc = func(size int) ([]uint, nvml.Return) {
			if size <= 0 {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return t.cpuSet(t.numa[i], size), nvml.SUCCESS
		}
		dev.GetCpuAffinityWithinScopeFunc = func(size int, scope nvml.AffinityScope) ([]uint, nvml.Return) {
			return dev.GetCpuAffinity(size)
		}
		dev.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := indexOf(devs, other)
			switch {
			case j < 0:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			case j == i:
				return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
			}
			return t.level(i, j), nvml.SUCCESS
		}
		dev.GetTopologyNearestGpusFunc = func(level nvml.GpuTopologyLevel) ([]nvml.Device, nvml.Return) {
			var out []nvml.Device
			for j, o := range devs {
				if j != i && t.level(i, j) <= level {
					out = append(out, o)
				}
			}
			return out, nvml.SUCCESS
		}
		s.nvlinkFuncs(dev, t, i)
	}
	s.DeviceGetHandleByPciBusIdFunc = func(id string) (nvml.Device, nvml.Return) {
		var bus uint32
		if len(id) < 7 {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if _, err := fmt.Sscanf(id[len(id)-7:], "%02x:00.0", &bus); err == nil {
			if d, ok := byBus[bus]; ok {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// nvlinkFuncs installs GPU i's NVLink calls. Link numbers beyond the
// card's links are ERROR_INVALID_ARGUMENT and a card without NVLink
// answers ERROR_NOT_SUPPORTED, as nvml.h documents for
// nvmlDeviceGetNvLinkState and its siblings.
func (s *Server) nvlinkFuncs(dev *server.Device, t topology, i int) {
	check := func(link int) (remote, bool, nvml.Return) {
		switch {
		case t.maxLinks == 0:
			return remote{}, false, nvml.ERROR_NOT_SUPPORTED
		case link < 0 || link >= t.maxLinks:
			return remote{}, false, nvml.ERROR_INVALID_ARGUMENT
		case link >= len(t.links[i]):
			return remote{}, false, nvml.SUCCESS
		}
		return t.links[i][link], true, nvml.SUCCESS
	}
	dev.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		_, up, ret := check(link)
		if ret != nvml.SUCCESS || !up {
			return nvml.FEATURE_DISABLED, ret
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	// A link that is down has no remote end: NVML answers
	// ERROR_NOT_SUPPORTED for its remote PCI info and device type.
	dev.GetNvLinkRemotePciInfoFunc = func(link int) (nvml.PciInfo, nvml.Return) {
		r, up, ret := check(link)
		if ret != nvml.SUCCESS {
			return nvml.PciInfo{}, ret
		}
		if !up {
			return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		if r.gpu >= 0 {
			return pciInfo(t.bus[r.gpu], dev.Config.PciDeviceId), nvml.SUCCESS
		}
		return pciInfo(switchBus(r.sw), 0), nvml.SUCCESS
	}
	dev.GetNvLinkRemoteDeviceTypeFunc = func(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		r, up, ret := check(link)
		if ret != nvml.SUCCESS {
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, ret
		}
		if !up {
			return nvml.NVLINK_DEVICE_TYPE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED
		}
		if r.gpu >= 0 {
			return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
		}
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
}

func indexOf(devs []*server.Device, d nvml.Device) int {
	for i, x := range devs {
		if nvml.Device(x) == d {
			return i
		}
	}
	return -1
}
