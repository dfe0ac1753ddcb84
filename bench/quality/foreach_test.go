package quality

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestForEach checks that every index runs, at most parallel at once,
// that done follows only the successes, and that the lowest failing
// index's error is returned.
func TestForEach(t *testing.T) {
	var mu sync.Mutex
	running, most := 0, 0
	var done []int
	err := ForEach(20, 3, func(i int) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		if i == 7 || i == 12 {
			return fmt.Errorf("job %d", i)
		}
		return nil
	}, func(i int) { done = append(done, i) })
	if err == nil || err.Error() != "job 7" {
		t.Errorf("ForEach error %v, want the lowest failing index's, job 7", err)
	}
	if most > 3 || most < 1 {
		t.Errorf("%d ran at once, want 1 to 3", most)
	}
	slices.Sort(done)
	if len(done) != 18 || slices.Contains(done, 7) || slices.Contains(done, 12) {
		t.Errorf("done called for %v, want the 18 successes", done)
	}
}
