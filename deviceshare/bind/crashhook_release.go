//go:build !vsharetest

package bind

import vcapi "volcano.sh/volcano/pkg/scheduler/api"

// crashHook is the release build's stand-in for the test-only crash hook,
// which is compiled only with the vsharetest build tag (crashhook.go, used
// by the e2e crash tests). It has no state and is never armed: the release
// scheduler does not read VSHARE_TEST_CRASH_AT_BIND and has no code that
// exits at bind, whatever its environment (crashhook_release_test.go checks
// the built binary).
type crashHook struct{}

// crashHookFromEnv returns nil: there is no hook to arm in a release build.
func crashHookFromEnv() *crashHook { return nil }

func (*crashHook) beforeCall([]*vcapi.TaskInfo) {}

func (*crashHook) afterCall([]*vcapi.TaskInfo) {}

func (*crashHook) beforeBind(*vcapi.TaskInfo) {}

func (*crashHook) afterBind() {}
