package nvidia

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// maxScoredNVLinks is the most NVLinks HAMi scores; a pair with more has no
// NVLink score there (HAMi pkg/device/nvidia/links.go, nvlinkCountToType:
// 18 links, the most any GPU has).
const maxScoredNVLinks = 18

// LinkScore is the pair score of l on HAMi's scale, so that
// hami.io/node-nvidia-score reads the same whichever agent wrote it: the
// PCIe level (cross-socket 10, same socket 20, host bridge 30, several PCIe
// switches 40, one switch 50, same board 60) plus 100 per NVLink (HAMi
// pkg/device/nvidia/calculate_score.go, calculateGPUPairScore, over the
// links of links.go GetP2PLink and GetNVLink).
func LinkScore(l Link) int32 {
	var s int32
	if l.LevelKnown {
		switch l.Level {
		case nvml.TOPOLOGY_SYSTEM:
			s = 10
		case nvml.TOPOLOGY_NODE:
			s = 20
		case nvml.TOPOLOGY_HOSTBRIDGE:
			s = 30
		case nvml.TOPOLOGY_MULTIPLE:
			s = 40
		case nvml.TOPOLOGY_SINGLE:
			s = 50
		case nvml.TOPOLOGY_INTERNAL:
			s = 60
		}
	}
	if l.NVLinks >= 1 && l.NVLinks <= maxScoredNVLinks {
		s += 100 * int32(l.NVLinks)
	}
	return s
}

// Scores returns the pair scores between the inventory's cards (n x n,
// row-major, in card order), or nil when no pair has a known link. A pair
// whose two directions disagree scores 0, as HAMi scores a pair whose P2P
// links are not bidirectional.
func (inv *Inventory) Scores() []int32 {
	n := len(inv.Cards)
	out := make([]int32, n*n)
	known := false
	for i, a := range inv.Cards {
		for j, b := range inv.Cards {
			if i == j || b.Index >= len(a.Links) || a.Index >= len(b.Links) {
				continue
			}
			ab, ba := LinkScore(a.Links[b.Index]), LinkScore(b.Links[a.Index])
			if ab != ba {
				continue
			}
			out[i*n+j] = ab
			known = known || ab > 0
		}
	}
	if !known {
		return nil
	}
	return out
}
