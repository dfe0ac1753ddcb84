package cards

import (
	"fmt"
	"strings"
)

// Device describes one simulated GPU: what DEV reports and the facts NVML
// reads of it (INFO, TOPO; the fake driver's PROTOCOL.md). Every fact beyond UUID, TotalBytes,
// SMs and Name has a default, so that the zero value describes a PCIe card
// of a one-socket server without NVLink or MIG: minor number and PCI bus
// number from its index, compute capability 8.0, NUMA node 0, no CPU
// affinity reported.
type Device struct {
	// UUID is the device's identifier ("GPU-..."); no spaces.
	UUID string
	// TotalBytes is the device memory; ALLOC fails with OOM beyond it.
	TotalBytes uint64
	// SMs is the streaming multiprocessor count.
	SMs int
	// Name is the product name as NVML reports it ("NVIDIA A100-SXM4-40GB"):
	// printable ASCII, no leading or trailing space.
	Name string

	// Minor is the card's /dev/nvidia<minor> number (nvmlDeviceGetMinorNumber);
	// nil means its index in the driver's list of devices.
	Minor *int
	// PCIBusID is the card's PCI address, domain:bus:device.function in
	// hexadecimal ("00000000:07:00.0"); "" means bus <index+1>, as
	// "00000000:01:00.0" for the first card.
	PCIBusID string
	// PCIDeviceID is the combined 16-bit device id and 16-bit vendor id
	// (0x20B010DE for an A100-SXM4-40GB) and PCISubsystemID the 32-bit
	// subsystem id, as nvmlPciInfo_t carries them; 0 when not configured.
	PCIDeviceID, PCISubsystemID uint32
	// ComputeCapability is "major.minor"; "" means "8.0".
	ComputeCapability string
	// MIGCapable says the card supports MIG; its mode is then disabled
	// (the fake driver does not partition cards). A card that is not MIG
	// capable answers nvmlDeviceGetMigMode with NVML_ERROR_NOT_SUPPORTED.
	MIGCapable bool
	// NUMANode is the NUMA node the card is attached to (its memory
	// affinity); -1 for a platform that reports none (sysfs numa_node -1).
	NUMANode int
	// CPUs are the CPUs of the card's ideal CPU affinity; empty means the
	// affinity is not reported (nvmlDeviceGetCpuAffinity: NOT_SUPPORTED).
	CPUs []int
	// HostBridge and PCIeSwitch name the PCIe host bridge and the PCIe
	// switch the card sits behind ("" when none is known). With NUMANode
	// they give the PCIe common ancestor of two cards (facts.go).
	HostBridge, PCIeSwitch string
	// NVLinks are the card's active NVLinks, link 0 first; none means the
	// card has no NVLink (nvmlDeviceGetNvLinkState: NOT_SUPPORTED).
	NVLinks []NVLink
}

// NVLink is one active NVLink of a card: to another GPU or to an NVSwitch.
type NVLink struct {
	// PeerUUID is the GPU at the other end. A link between two GPUs is
	// listed on both, as many times on each.
	PeerUUID string
	// SwitchBusID is the PCI bus ID of the NVSwitch at the other end.
	SwitchBusID string
}

// Validate checks one device description on its own; Resolve checks what
// involves several (unique minors and bus IDs, NVLink peers).
func (d *Device) Validate() error {
	if d.UUID == "" || strings.ContainsAny(d.UUID, " \t\r\n") {
		return fmt.Errorf("UUID %q: want non-empty, without white space", d.UUID)
	}
	if !PrintableName(d.Name) {
		return fmt.Errorf("name %q: want non-empty printable ASCII without leading or trailing space", d.Name)
	}
	if d.TotalBytes == 0 {
		return fmt.Errorf("TotalBytes is 0, want > 0")
	}
	if d.SMs <= 0 {
		return fmt.Errorf("SMs is %d, want > 0", d.SMs)
	}
	if d.Minor != nil && (*d.Minor < 0 || *d.Minor > maxMinor) {
		return fmt.Errorf("minor number %d, want 0..%d", *d.Minor, maxMinor)
	}
	if d.PCIBusID != "" {
		if _, err := parseBusID(d.PCIBusID); err != nil {
			return fmt.Errorf("PCIBusID: %w", err)
		}
	}
	if d.ComputeCapability != "" {
		if _, _, err := parseCC(d.ComputeCapability); err != nil {
			return fmt.Errorf("ComputeCapability: %w", err)
		}
	}
	if d.NUMANode < -1 {
		return fmt.Errorf("NUMANode is %d, want -1 (none) or a node number", d.NUMANode)
	}
	for i, cpu := range d.CPUs {
		if cpu < 0 || cpu >= maxCPUs {
			return fmt.Errorf("CPUs[%d] is %d, want 0..%d", i, cpu, maxCPUs-1)
		}
	}
	if len(d.NVLinks) > maxNVLinks {
		return fmt.Errorf("%d NVLinks, want at most %d (NVML_NVLINK_MAX_LINKS)", len(d.NVLinks), maxNVLinks)
	}
	for i, l := range d.NVLinks {
		if (l.PeerUUID == "") == (l.SwitchBusID == "") {
			return fmt.Errorf("NVLinks[%d]: want exactly one of PeerUUID and SwitchBusID, got %q and %q", i, l.PeerUUID, l.SwitchBusID)
		}
		if l.PeerUUID == d.UUID {
			return fmt.Errorf("NVLinks[%d].PeerUUID %q is the card itself", i, l.PeerUUID)
		}
		if l.SwitchBusID != "" {
			if _, err := parseBusID(l.SwitchBusID); err != nil {
				return fmt.Errorf("NVLinks[%d].SwitchBusID: %w", i, err)
			}
		}
	}
	return nil
}

// PrintableName reports whether s is a name DEV can carry as its last
// field: printable ASCII, not empty, no leading or trailing space.
func PrintableName(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// PrintableWord reports whether s is printable ASCII without spaces.
func PrintableWord(s string) bool {
	return PrintableName(s) && !strings.Contains(s, " ")
}
