package schedconf_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deploy"
	"github.com/vgpushare/vshare/deploy/schedconf"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// TestPlainSchedulerConfParses reads the plain manifests'
// volcano-scheduler.conf with Volcano's scheduler configuration parser and
// the deviceshare plugin's argument parser.
func TestPlainSchedulerConfParses(t *testing.T) {
	ms, err := deploy.ReadManifests(filepath.Join("..", deploy.PlainManifests))
	if err != nil {
		t.Fatal(err)
	}
	cm, err := deploy.ConfigMapWith(ms, "volcano-scheduler.conf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := schedconf.SchedulerArgs(cm.Data["volcano-scheduler.conf"])
	if err != nil {
		t.Fatal(err)
	}
	want := pluginargs.Args{
		VGPUEnable: true, SchedulePolicy: "binpack", ScheduleWeight: 10, NodeLockExpiry: nodelock.DefaultTTL,
		ConfigMapName: config.DefaultConfigMapName, ConfigMapNamespace: config.DefaultConfigMapNamespace,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deviceshare arguments (-want +got):\n%s", diff)
	}
}

// TestSchedulerArgsRejects: the check is not a formality.
func TestSchedulerArgsRejects(t *testing.T) {
	const head = "actions: \"allocate\"\ntiers:\n- plugins:\n"
	for _, tc := range []struct{ name, conf, want string }{
		{"no plugin", head + "  - name: gang\n", "found it 0 times"},
		{"twice", head + "  - name: deviceshare\n  - name: deviceshare\n", "found it 2 times"},
		{"typo", head + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnabled: true\n", "deviceshare.VGPUEnabled"},
		{"bad value", head + "  - name: deviceshare\n    arguments:\n      deviceshare.ScheduleWeight: 101\n", "deviceshare.ScheduleWeight"},
		{"conflict", head + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n      deviceshare.GPUSharingEnable: true\n", "deviceshare.VGPUEnable"},
		{"unknown action", "actions: \"allocate, teleport\"\ntiers:\n- plugins:\n  - name: deviceshare\n", "teleport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schedconf.SchedulerArgs(tc.conf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
