package nvidia

import (
	"errors"
	"math/bits"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Link is how two GPUs are connected, as NVML reports it.
type Link struct {
	// Level is the PCIe common ancestor (nvml.TOPOLOGY_INTERNAL ...
	// nvml.TOPOLOGY_SYSTEM); LevelKnown is false when the driver does not
	// report it.
	Level      nvml.GpuTopologyLevel
	LevelKnown bool
	// NVLinks is the number of active NVLinks between the two: direct
	// links to the other GPU, or, when both reach NVSwitches, the smaller
	// of their switch link counts.
	NVLinks int
	// ViaSwitch reports that NVLinks go through NVSwitches.
	ViaSwitch bool
}

// nvlinkEnds are one GPU's active NVLinks: the remote PCI bus IDs of links
// to GPUs and the count of links to NVSwitches.
type nvlinkEnds struct {
	remote   []string
	switches int
}

// skippable reports an NVML answer that means "this call or link does not
// exist here", which leaves a fact unknown rather than failing discovery:
// old GPUs and consumer cards answer NOT_SUPPORTED, link numbers beyond a
// card's links INVALID_ARGUMENT (nvml.h, nvmlDeviceGetNvLinkState).
func skippable(ret nvml.Return) bool {
	return errors.Is(ret, nvml.ERROR_NOT_SUPPORTED) || errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT) ||
		errors.Is(ret, nvml.ERROR_FUNCTION_NOT_FOUND)
}

// discoverLinks fills in every GPU's Links. Topology is optional: a call the
// driver does not support, or that fails, leaves the pair's facts unknown
// (logged), never fails discovery.
func discoverLinks(devs []nvml.Device, gpus []GPU) {
	ends := make([]nvlinkEnds, len(devs))
	busIDs := make([]string, len(devs))
	for i, dev := range devs {
		ends[i] = readNVLinks(dev, gpus[i].UUID)
		if p, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
			busIDs[i] = busID(p)
		}
	}
	for i := range devs {
		gpus[i].Links = make([]Link, len(devs))
		for j := range devs {
			if i == j {
				continue
			}
			var l Link
			level, ret := devs[i].GetTopologyCommonAncestor(devs[j])
			switch {
			case ret == nvml.SUCCESS:
				l.Level, l.LevelKnown = level, true
			case !skippable(ret):
				klog.ErrorS(ret, "Cannot read the PCIe topology between two GPUs; treating it as unknown",
					"gpu", gpus[i].UUID, "other", gpus[j].UUID)
			}
			if busIDs[j] != "" {
				for _, r := range ends[i].remote {
					if r == busIDs[j] {
						l.NVLinks++
					}
				}
			}
			if l.NVLinks == 0 && ends[i].switches > 0 && ends[j].switches > 0 {
				l.NVLinks, l.ViaSwitch = min(ends[i].switches, ends[j].switches), true
			}
			gpus[i].Links[j] = l
		}
	}
}

// readNVLinks reads a GPU's active NVLinks, links 0 to
// nvml.NVLINK_MAX_LINKS-1. A link whose remote end is an NVSwitch counts as
// a switch link; any other names its remote PCI bus ID.
func readNVLinks(dev nvml.Device, uuid string) nvlinkEnds {
	var e nvlinkEnds
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := dev.GetNvLinkState(link)
		if skippable(ret) {
			continue
		}
		if ret != nvml.SUCCESS {
			klog.ErrorS(ret, "Cannot read an NVLink's state; the GPU's NVLinks are treated as absent", "gpu", uuid, "link", link)
			return nvlinkEnds{}
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		typ, ret := dev.GetNvLinkRemoteDeviceType(link)
		if ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH {
			e.switches++
			continue
		}
		p, ret := dev.GetNvLinkRemotePciInfo(link)
		if ret != nvml.SUCCESS {
			continue
		}
		e.remote = append(e.remote, busID(p))
	}
	return e
}

// busID is the PCI bus ID of p, lower case without the domain's leading
// zeros, so that the 8- and 4-digit domain forms compare equal.
func busID(p nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	id := strings.ToLower(b.String())
	if dom, rest, ok := strings.Cut(id, ":"); ok {
		dom = strings.TrimLeft(dom, "0")
		return dom + ":" + rest
	}
	return id
}

// maxNUMANodes is how many NUMA nodes the memory affinity query covers.
const maxNUMANodes = 1024

// numaNode reads the NUMA node the GPU is attached to. NVML's
// GetNumaNodeId answers only where the GPU is itself a NUMA node (coherent
// Grace platforms); elsewhere it is ERROR_NOT_SUPPORTED, and the node is
// the one the GPU's memory affinity (scope NUMA node) names. A GPU close to
// several nodes, or none, has no NUMA node (-1).
func numaNode(dev nvml.Device) int {
	if n, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS {
		return n
	} else if !skippable(ret) {
		return -1
	}
	set, ret := dev.GetMemoryAffinity(maxNUMANodes/64, nvml.AFFINITY_SCOPE_NODE)
	if ret != nvml.SUCCESS {
		return -1
	}
	node, found := -1, 0
	for w, word := range set {
		for word != 0 {
			b := bits.TrailingZeros64(uint64(word))
			node, found = w*64+b, found+1
			word &^= 1 << uint(b)
		}
	}
	if found != 1 {
		return -1
	}
	return node
}
