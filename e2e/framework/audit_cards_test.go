//go:build e2e

package framework

import "testing"

// TestWholeAnswersMatchOnlyWholeEntries: an Allocate answer without
// libvgpu's limits is a whole card; the auditor accepts it for an entry of
// all the card's memory with no SM limit (cores 0) or all the cores, and
// flags it for any share, which it would leave unlimited.
func TestWholeAnswersMatchOnlyWholeEntries(t *testing.T) {
	capMiB := func(string) int { return 40960 }
	whole, isWhole := answerDevices(map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-a"}, capMiB)
	if !isWhole || len(whole) != 1 || whole[0] != (device{uuid: "GPU-a", memMiB: 40960, core: CoresPerCard}) {
		t.Fatalf("answer without limits read as %+v (whole %v), want all of GPU-a", whole, isWhole)
	}
	limited, isWhole := answerDevices(map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-a",
		"CUDA_DEVICE_MEMORY_LIMIT_0": "20000m", "CUDA_DEVICE_SM_LIMIT": "30"}, capMiB)
	if isWhole || limited[0] != (device{uuid: "GPU-a", memMiB: 20000, core: 30}) {
		t.Fatalf("answer with limits read as %+v (whole %v)", limited, isWhole)
	}
	for _, tc := range []struct {
		want  device
		match bool
	}{
		{device{"GPU-a", 40960, 100}, true},
		{device{"GPU-a", 40960, 0}, true},
		{device{"GPU-a", 40960, 50}, false},
		{device{"GPU-a", 40000, 100}, false},
		{device{"GPU-b", 40960, 100}, false},
	} {
		if got := sameDevices([]device{tc.want}, whole, true); got != tc.match {
			t.Errorf("whole answer against entry %+v: match %v, want %v", tc.want, got, tc.match)
		}
	}
	if !sameDevices([]device{{"GPU-a", 20000, 30}}, limited, false) || sameDevices([]device{{"GPU-a", 20000, 40}}, limited, false) {
		t.Errorf("a limited answer must match its entry exactly")
	}
}
