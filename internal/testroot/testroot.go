// Package testroot lets a test that needs root (containers with runc, a
// real node, files given to other users) say so in one way: it fails when
// the run requires root tests, and skips with the reason otherwise.
//
// `make test` (what CI runs, as root) sets VSHARE_ROOT_REQUIRED=1, so a
// root test can never pass silently there by skipping; a developer's plain
// `go test` as another user skips them.
package testroot

import (
	"os"
	"testing"
)

// EnvRequired, set to 1, makes Require fail instead of skip.
const EnvRequired = "VSHARE_ROOT_REQUIRED"

// Required reports whether the run requires root tests to run.
func Required() bool { return os.Getenv(EnvRequired) == "1" }

// Require stops the test unless the process is root: a failure when
// Required, a skip naming why otherwise.
func Require(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	Unavailable(t, why+": needs root")
}

// Unavailable stops a test whose environment lacks what it needs (root, a
// kernel feature): a failure when Required, a skip otherwise.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (%s=1: root tests must run)", why, EnvRequired)
	}
	t.Skip(why)
}
