//go:build !race

package quality

// raceEnabled reports whether the race detector is on; the long
// trace-driven checks skip under it (they take minutes there).
const raceEnabled = false
