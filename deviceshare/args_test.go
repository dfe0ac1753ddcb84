package deviceshare

import (
	"testing"

	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

// TestRemovingAKeyTakesEffectNextSession: arguments are parsed per plugin
// build, never kept in package state.
func TestRemovingAKeyTakesEffectNextSession(t *testing.T) {
	st := newTestState(Options{})
	p1 := st.newPlugin(framework.Arguments{pluginargs.ArgGPUSharingEnable: true, pluginargs.ArgSchedulePolicy: "spread"})
	p2 := st.newPlugin(framework.Arguments{pluginargs.ArgGPUSharingEnable: true})
	if p1.args.SchedulePolicy != "spread" || p2.args.SchedulePolicy != pluginargs.DefaultSchedulePolicy {
		t.Errorf("policies = %q then %q, want spread then %q", p1.args.SchedulePolicy, p2.args.SchedulePolicy, pluginargs.DefaultSchedulePolicy)
	}
}
