package toolkit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// Environment variables of the container that the toolkit reads
// (docker-specialized.html; the toolkit's image package).
const (
	EnvVisibleDevices     = "NVIDIA_VISIBLE_DEVICES"
	EnvDriverCapabilities = "NVIDIA_DRIVER_CAPABILITIES"
	envCUDAVersion        = "CUDA_VERSION"
	envRequireCUDA        = "NVIDIA_REQUIRE_CUDA"
)

// defaultCapabilities is the capability set when NVIDIA_DRIVER_CAPABILITIES
// is empty or unset: "use default driver capability: utility,compute".
var defaultCapabilities = []string{"compute", "utility"}

// Request is what a container asks of the GPU driver.
type Request struct {
	// Cards are the cards given to the container, in the driver's order.
	Cards []fakedriver.Card
	// Capabilities are the driver capabilities (sorted); none means the
	// container gets nothing at all (void), as with runc.
	Capabilities []string
}

// ReadRequest reads a container's request from its process environment
// ("K=V"; the last of a name wins, as the toolkit reads it into a map)
// against the driver's cards and the supported capabilities.
func ReadRequest(env []string, cards []fakedriver.Card, supported []string) (Request, error) {
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	// A legacy CUDA image (CUDA_VERSION without NVIDIA_REQUIRE_CUDA) gets
	// every GPU and capability when it says nothing (the toolkit's
	// CUDA.IsLegacy and DevicesFromEnvvars).
	legacy := vars[envCUDAVersion] != "" && vars[envRequireCUDA] == ""
	devices, set := vars[EnvVisibleDevices]
	if !set && legacy {
		devices = "all"
	}
	entries := splitList(devices)
	if len(entries) == 0 || contains(entries, "void") {
		return Request{}, nil
	}
	req := Request{Capabilities: capabilities(vars, legacy, supported)}
	if contains(entries, "none") {
		return req, nil
	}
	chosen, err := selectCards(entries, cards)
	if err != nil {
		return Request{}, err
	}
	req.Cards = chosen
	return req, nil
}

// capabilities resolves NVIDIA_DRIVER_CAPABILITIES: the default when empty
// or unset (every supported one when unset in a legacy image), `all` for
// every supported one, unsupported ones ignored (the toolkit's hook logs
// "Ignoring unsupported capabilities").
func capabilities(vars map[string]string, legacy bool, supported []string) []string {
	value, set := vars[EnvDriverCapabilities]
	asked := splitList(value)
	switch {
	case !set && legacy, contains(asked, "all"):
		asked = supported
	case len(asked) == 0:
		asked = defaultCapabilities
	}
	var out []string
	for _, c := range supported {
		if contains(asked, c) {
			out = append(out, c)
		}
	}
	return out
}

// selectCards picks the cards the entries name, as libnvidia-container's
// select_devices does: `all` (any case) for every card, else for each entry
// a whole GPU UUID (any case), a PCI bus ID ("%x:%02x:%02x.0") or a
// decimal index; an entry naming no card is an error ("unknown device").
// A card named twice is given once; the cards keep the driver's order.
func selectCards(entries []string, cards []fakedriver.Card) ([]fakedriver.Card, error) {
	picked := make([]bool, len(cards))
	for _, e := range entries {
		if strings.EqualFold(e, "all") {
			return cards, nil
		}
		i, ok := findCard(e, cards)
		if !ok {
			return nil, fmt.Errorf("%s=%s: %s: unknown device", EnvVisibleDevices, strings.Join(entries, ","), e)
		}
		picked[i] = true
	}
	var out []fakedriver.Card
	for i, c := range cards {
		if picked[i] {
			out = append(out, c)
		}
	}
	return out, nil
}

// findCard finds the card an entry names.
func findCard(e string, cards []fakedriver.Card) (int, bool) {
	if len(e) > len("GPU-") && strings.EqualFold(e[:4], "GPU-") {
		for i, c := range cards {
			if strings.EqualFold(c.UUID, e) {
				return i, true
			}
		}
	}
	if bus, ok := normalBusID(e); ok {
		for i, c := range cards {
			if b, _ := normalBusID(c.PCIBusID); b == bus {
				return i, true
			}
		}
	}
	if n, err := strconv.ParseUint(e, 10, 64); err == nil && n < uint64(len(cards)) {
		return int(n), true
	}
	return 0, false
}

// normalBusID reads "domain:bus:device.0" in hexadecimal, leading zeros
// optional, as libnvidia-container's matches_pci_format.
func normalBusID(s string) (string, bool) {
	var dom, bus, dev uint32
	var rest string
	n, _ := fmt.Sscanf(s, "%x:%x:%x.0%s", &dom, &bus, &dev, &rest)
	if n != 3 {
		return "", false
	}
	return fmt.Sprintf("%08x:%02x:%02x.0", dom, bus, dev), true
}
