//go:build e2e

package runc

import (
	"os"

	"golang.org/x/sys/unix"
)

// deviceNode describes a host character device for the spec; false when
// the host has no such node (no GPU here: the fake driver is a socket).
func deviceNode(path string) (ociDevice, bool) {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return ociDevice{}, false
	}
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ociDevice{}, false
	}
	return ociDevice{Path: path, Type: "c", Major: int64(unix.Major(uint64(st.Rdev))),
		Minor: int64(unix.Minor(uint64(st.Rdev)))}, true
}
