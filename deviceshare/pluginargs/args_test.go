package pluginargs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

func TestParseArgs(t *testing.T) {
	defaults := Args{
		SchedulePolicy: "binpack", ScheduleWeight: 1,
		ConfigMapName: "volcano-vgpu-device-config", ConfigMapNamespace: "kube-system",
	}
	tests := []struct {
		name    string
		in      framework.Arguments
		want    Args
		wantErr []string // substrings the error must contain
	}{
		{name: "empty gives defaults", in: framework.Arguments{}, want: defaults},
		{
			name: "every key, YAML types",
			in: framework.Arguments{
				ArgGPUSharingEnable: true, ArgNodeLockEnable: true,
				ArgSchedulePolicy: "spread", ArgScheduleWeight: 10,
				ArgKnownGeometriesCMName: "my-config", ArgKnownGeometriesCMNamespace: "volcano-system",
			},
			want: Args{GPUSharingEnable: true, NodeLockEnable: true, SchedulePolicy: "spread", ScheduleWeight: 10,
				ConfigMapName: "my-config", ConfigMapNamespace: "volcano-system"},
		},
		{
			name: "bools and ints as strings, policy case-insensitive",
			in: framework.Arguments{ArgVGPUEnable: "true", ArgAscendHAMiVNPUEnable: "True", ArgAscendMindClusterVNPUEnable: "1",
				ArgSchedulePolicy: " Binpack ", ArgScheduleWeight: "7"},
			want: Args{VGPUEnable: true, AscendHAMiVNPUEnable: true, AscendMindClusterVNPUEnable: true,
				SchedulePolicy: "binpack", ScheduleWeight: 7, ConfigMapName: defaults.ConfigMapName, ConfigMapNamespace: defaults.ConfigMapNamespace},
		},
		{name: "weight as float64 from JSON", in: framework.Arguments{ArgScheduleWeight: float64(3)},
			want: Args{SchedulePolicy: "binpack", ScheduleWeight: 3, ConfigMapName: defaults.ConfigMapName, ConfigMapNamespace: defaults.ConfigMapNamespace}},
		{name: "empty policy keeps the default", in: framework.Arguments{ArgSchedulePolicy: ""}, want: defaults},
		{name: "lock expiry as a duration", in: framework.Arguments{ArgNodeLockExpiry: "30s"},
			want: Args{NodeLockExpiry: 30 * time.Second, SchedulePolicy: "binpack", ScheduleWeight: 1, ConfigMapName: defaults.ConfigMapName, ConfigMapNamespace: defaults.ConfigMapNamespace}},
		{name: "lock expiry in seconds", in: framework.Arguments{ArgNodeLockExpiry: 90},
			want: Args{NodeLockExpiry: 90 * time.Second, SchedulePolicy: "binpack", ScheduleWeight: 1, ConfigMapName: defaults.ConfigMapName, ConfigMapNamespace: defaults.ConfigMapNamespace}},
		{name: "empty lock expiry keeps the default", in: framework.Arguments{ArgNodeLockExpiry: ""}, want: defaults},
		{name: "lock expiry too short", in: framework.Arguments{ArgNodeLockExpiry: "500ms"},
			wantErr: []string{ArgNodeLockExpiry, `"500ms"`, "between 1s and 1h0m0s"}},
		{name: "lock expiry not a duration", in: framework.Arguments{ArgNodeLockExpiry: "soon"},
			wantErr: []string{ArgNodeLockExpiry, `"soon"`, "must be a duration"}},
		{name: "bad bool", in: framework.Arguments{ArgGPUNumberEnable: "yes please"},
			wantErr: []string{ArgGPUNumberEnable, `"yes please"`, "must be true or false"}},
		{name: "bad policy", in: framework.Arguments{ArgSchedulePolicy: "random"},
			wantErr: []string{ArgSchedulePolicy, `"random"`, `"binpack"`, `"spread"`, `"fragment"`}},
		{name: "fragment policy", in: framework.Arguments{ArgSchedulePolicy: "Fragment"},
			want: Args{SchedulePolicy: "fragment", ScheduleWeight: 1, ConfigMapName: defaults.ConfigMapName, ConfigMapNamespace: defaults.ConfigMapNamespace}},
		{name: "weight out of range", in: framework.Arguments{ArgScheduleWeight: 101},
			wantErr: []string{ArgScheduleWeight, "101", "between 0 and 100"}},
		{name: "negative weight", in: framework.Arguments{ArgScheduleWeight: -1},
			wantErr: []string{ArgScheduleWeight, "-1", "between 0 and 100"}},
		{name: "fractional weight", in: framework.Arguments{ArgScheduleWeight: 1.5},
			wantErr: []string{ArgScheduleWeight, "1.5", "whole number"}},
		{name: "non-string configmap name", in: framework.Arguments{ArgKnownGeometriesCMName: 3},
			wantErr: []string{ArgKnownGeometriesCMName, "must be a string"}},
		{name: "configmap name not a DNS subdomain", in: framework.Arguments{ArgKnownGeometriesCMName: "Bad_Name"},
			wantErr: []string{ArgKnownGeometriesCMName, `"Bad_Name"`, "RFC 1123"}},
		{name: "namespace not a DNS label", in: framework.Arguments{ArgKnownGeometriesCMNamespace: "a.b"},
			wantErr: []string{ArgKnownGeometriesCMNamespace, `"a.b"`, "must not contain dots"}},
		{name: "share and number together", in: framework.Arguments{ArgGPUSharingEnable: true, ArgGPUNumberEnable: true},
			wantErr: []string{ArgGPUNumberEnable, ArgGPUSharingEnable, "cannot be true together"}},
		{name: "share and vgpu together", in: framework.Arguments{ArgGPUSharingEnable: "true", ArgVGPUEnable: true},
			wantErr: []string{ArgVGPUEnable, "cannot be true together"}},
		{name: "every error is reported", in: framework.Arguments{ArgSchedulePolicy: "x", ArgScheduleWeight: "heavy"},
			wantErr: []string{ArgSchedulePolicy, ArgScheduleWeight}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse(%v) succeeded, want an error containing %q", tc.in, tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%v): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	in := framework.Arguments{
		ArgVGPUEnable: true, "deviceshare.VGPUEnabel": true, "deviceshare.Weight": 1, "other.key": 1,
	}
	want := []string{"deviceshare.VGPUEnabel", "deviceshare.Weight"}
	if diff := cmp.Diff(want, UnknownKeys(in)); diff != "" {
		t.Errorf("UnknownKeys (-want +got):\n%s", diff)
	}
}
