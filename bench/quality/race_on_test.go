//go:build race

package quality

const raceEnabled = true
