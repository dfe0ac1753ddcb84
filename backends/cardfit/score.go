package cardfit

import "github.com/vgpushare/vshare/device"

// NodeScore turns the n cards chosen for a pod into a node score in
// [0, device.MaxScore]: fullness(i) is chosen card i's fullness in [0, 1]
// before and after it takes its container. Binpack (and every policy but
// spread) scores the mean fullness after placement, so fuller nodes win;
// spread scores one minus the mean fullness before it, so idle cards score
// device.MaxScore. No cards score 0.
func NodeScore(policy string, n int, fullness func(i int) (before, after float64)) float64 {
	if n == 0 {
		return 0
	}
	var sum float64
	for i := range n {
		before, after := fullness(i)
		if policy == device.PolicySpread {
			sum += 1 - before
		} else {
			sum += after
		}
	}
	return min(max(device.MaxScore*sum/float64(n), 0), device.MaxScore)
}
