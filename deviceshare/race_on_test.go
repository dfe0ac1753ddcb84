//go:build race

package deviceshare

const raceEnabled = true
