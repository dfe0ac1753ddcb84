package cards

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits of the facts a Device may state.
const (
	// maxMinor is the largest /dev/nvidia<minor> number: the NVIDIA
	// driver's character devices use minors below 255 for GPUs (255 is
	// /dev/nvidiactl).
	maxMinor = 254
	// maxCPUs bounds Device.CPUs; NVML's callers size the bitmask.
	maxCPUs = 4096
	// maxNVLinks is NVML_NVLINK_MAX_LINKS (nvml.h).
	maxNVLinks = 36
)

// NVML topology levels (nvmlGpuTopologyLevel_t in the NVML API reference):
// how far apart two devices are on the PCIe tree, nearest first.
const (
	topoInternal   = 0  // NVML_TOPOLOGY_INTERNAL: on one board
	topoSingle     = 10 // NVML_TOPOLOGY_SINGLE: behind one PCIe switch
	topoHostBridge = 30 // NVML_TOPOLOGY_HOSTBRIDGE: behind one host bridge
	topoNode       = 40 // NVML_TOPOLOGY_NODE: on one NUMA node
	topoSystem     = 50 // NVML_TOPOLOGY_SYSTEM: anywhere in the system
)

// EventXidCritical is nvmlEventTypeXidCriticalError (nvml.h), the only event
// type the fake driver can raise (InjectXid).
const EventXidCritical = 0x8

// Facts are one card's facts with the defaults applied, as INFO and TOPO
// report them.
type Facts struct {
	minor            int
	busID            busID
	ccMajor, ccMinor int
	migCapable       bool
	pciDevice, pciSS uint32
	numa             int
	cpus             []int
	hostBridge       string
	pcieSwitch       string
	links            []link
}

// link is an NVLink with its remote end resolved to a PCI bus ID.
type link struct {
	toSwitch bool
	remote   busID
}

// busID is a PCI address.
type busID struct {
	domain             uint32
	bus, dev, function uint8
}

// String formats the address as nvmlPciInfo_t.busId does
// (NVML_DEVICE_PCI_BUS_ID_FMT, "%08X:%02X:%02X.0" with the function).
func (b busID) String() string {
	return fmt.Sprintf("%08X:%02X:%02X.%X", b.domain, b.bus, b.dev, b.function)
}

// parseBusID reads "domain:bus:device.function" in hexadecimal.
func parseBusID(s string) (busID, error) {
	bad := fmt.Errorf("bus ID %q: want domain:bus:device.function in hexadecimal, like 00000000:07:00.0", s)
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return busID{}, bad
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return busID{}, bad
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok {
		return busID{}, bad
	}
	var b busID
	for _, f := range []struct {
		s    string
		bits int
		set  func(uint64)
	}{
		{dom, 32, func(v uint64) { b.domain = uint32(v) }},
		{bus, 8, func(v uint64) { b.bus = uint8(v) }},
		{dev, 5, func(v uint64) { b.dev = uint8(v) }},
		{fn, 3, func(v uint64) { b.function = uint8(v) }},
	} {
		v, err := strconv.ParseUint(f.s, 16, f.bits)
		if err != nil || f.s == "" || f.s[0] == '+' {
			return busID{}, bad
		}
		f.set(v)
	}
	return b, nil
}

// parseCC reads "major.minor".
func parseCC(s string) (int, int, error) {
	maj, mnr, ok := strings.Cut(s, ".")
	a, err1 := strconv.ParseUint(maj, 10, 8)
	b, err2 := strconv.ParseUint(mnr, 10, 8)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q: want major.minor, like 8.0", s)
	}
	return int(a), int(b), nil
}

// Resolve applies the defaults to every device and checks what involves
// several: unique minors and bus IDs, NVLink peers that exist and list
// the link back as often. The devices are valid one by one.
func Resolve(devs []Device) ([]Facts, error) {
	out := make([]Facts, len(devs))
	byUUID := make(map[string]int, len(devs))
	minors := map[int]int{}
	buses := map[busID]int{}
	for i, d := range devs {
		byUUID[d.UUID] = i
		f := Facts{minor: i, numa: d.NUMANode, cpus: d.CPUs, migCapable: d.MIGCapable,
			pciDevice: d.PCIDeviceID, pciSS: d.PCISubsystemID, hostBridge: d.HostBridge,
			pcieSwitch: d.PCIeSwitch, ccMajor: 8}
		if d.Minor != nil {
			f.minor = *d.Minor
		}
		f.busID = busID{bus: uint8(i + 1)}
		if d.PCIBusID != "" {
			f.busID, _ = parseBusID(d.PCIBusID)
		}
		if d.ComputeCapability != "" {
			f.ccMajor, f.ccMinor, _ = parseCC(d.ComputeCapability)
		}
		if j, dup := minors[f.minor]; dup {
			return nil, fmt.Errorf("config: Devices[%d] has minor number %d, as Devices[%d]: want unique", i, f.minor, j)
		}
		minors[f.minor] = i
		if j, dup := buses[f.busID]; dup {
			return nil, fmt.Errorf("config: Devices[%d] has PCI bus ID %s, as Devices[%d]: want unique", i, f.busID, j)
		}
		buses[f.busID] = i
		out[i] = f
	}
	for i, d := range devs {
		for k, l := range d.NVLinks {
			if l.SwitchBusID != "" {
				b, _ := parseBusID(l.SwitchBusID)
				out[i].links = append(out[i].links, link{toSwitch: true, remote: b})
				continue
			}
			j, ok := byUUID[l.PeerUUID]
			if !ok {
				return nil, fmt.Errorf("config: Devices[%d].NVLinks[%d].PeerUUID %q: no such device", i, k, l.PeerUUID)
			}
			if there, back := peerLinks(d.NVLinks, devs[j].UUID), peerLinks(devs[j].NVLinks, d.UUID); there != back {
				return nil, fmt.Errorf("config: Devices[%d] lists %d NVLinks to %s, which lists %d back: want the same count on both ends",
					i, there, devs[j].UUID, back)
			}
			out[i].links = append(out[i].links, link{remote: out[j].busID})
		}
	}
	return out, nil
}

// Minor is the card's /dev/nvidia<minor> number.
func (f *Facts) Minor() int { return f.minor }

// BusID is the card's PCI address as nvmlPciInfo_t.busId formats it.
func (f *Facts) BusID() string { return f.busID.String() }

// peerLinks counts the links to the GPU with the UUID.
func peerLinks(links []NVLink, uuid string) int {
	n := 0
	for _, l := range links {
		if l.PeerUUID == uuid {
			n++
		}
	}
	return n
}

// CommonAncestor is the PCIe level of the path between two cards, what
// nvmlDeviceGetTopologyCommonAncestor reports: behind the same switch,
// the same host bridge, on the same NUMA node or across the system. A
// card and itself are one board (NVML_TOPOLOGY_INTERNAL; the reference
// does not say what the call answers for one device twice).
func CommonAncestor(a, b *Facts) int {
	switch {
	case a == b:
		return topoInternal
	case a.pcieSwitch != "" && a.pcieSwitch == b.pcieSwitch:
		return topoSingle
	case a.hostBridge != "" && a.hostBridge == b.hostBridge:
		return topoHostBridge
	case a.numa >= 0 && a.numa == b.numa:
		return topoNode
	}
	return topoSystem
}

// Info formats the INFO answer's fields (PROTOCOL.md): compute
// capability, MIG capability, PCI ids, NUMA node, CPUs, NVLinks and the
// supported event types.
func (f *Facts) Info() string {
	numa := "-"
	if f.numa >= 0 {
		numa = strconv.Itoa(f.numa)
	}
	cpus := "-"
	if len(f.cpus) > 0 {
		s := make([]string, len(f.cpus))
		for i, c := range f.cpus {
			s[i] = strconv.Itoa(c)
		}
		cpus = strings.Join(s, ",")
	}
	links := "-"
	if len(f.links) > 0 {
		s := make([]string, len(f.links))
		for i, l := range f.links {
			kind := "gpu"
			if l.toSwitch {
				kind = "switch"
			}
			s[i] = kind + "/" + l.remote.String()
		}
		links = strings.Join(s, ",")
	}
	mig := 0
	if f.migCapable {
		mig = 1
	}
	return fmt.Sprintf("%d %d %d %d %d %s %s %s %d", f.ccMajor, f.ccMinor, mig, f.pciDevice, f.pciSS,
		numa, cpus, links, EventXidCritical)
}
