package pluginargs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v2"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
)

func TestParseExclusiveRules(t *testing.T) {
	tests := []struct {
		name string
		// conf is the plugin's arguments as volcano-scheduler.conf writes them.
		conf    string
		want    []device.ExclusiveRule
		wantErr []string // substrings the error must contain
	}{
		{name: "absent", conf: "deviceshare.VGPUEnable: true"},
		{name: "two rules", conf: `
deviceshare.GPUExclusiveRules:
- {app: training, team: ml}
- {example.com/workload: inference}`,
			want: []device.ExclusiveRule{{Labels: map[string]string{"app": "training", "team": "ml"}},
				{Labels: map[string]string{"example.com/workload": "inference"}}}},
		{name: "quoted boolean value", conf: `deviceshare.GPUExclusiveRules: [{gpu-exclusive: "true"}]`,
			want: []device.ExclusiveRule{{Labels: map[string]string{"gpu-exclusive": "true"}}}},
		{name: "not a list", conf: `deviceshare.GPUExclusiveRules: {app: training}`,
			wantErr: []string{ArgGPUExclusiveRules, "must be a list of rules"}},
		{name: "rule not a map", conf: `deviceshare.GPUExclusiveRules: [app=training]`,
			wantErr: []string{ArgGPUExclusiveRules + "[0]", `"app=training"`, "must be a map of pod label keys to values"}},
		{name: "empty rule", conf: `deviceshare.GPUExclusiveRules: [{app: a}, {}]`,
			wantErr: []string{ArgGPUExclusiveRules + "[1]", "at least one label"}},
		{name: "unquoted boolean", conf: `deviceshare.GPUExclusiveRules: [{gpu-exclusive: true}]`,
			wantErr: []string{ArgGPUExclusiveRules + "[0][gpu-exclusive]", "must be a string", "quote"}},
		{name: "bad label key", conf: `deviceshare.GPUExclusiveRules: [{"bad key": x}]`,
			wantErr: []string{ArgGPUExclusiveRules + "[0][bad key]", "label key"}},
		{name: "bad label value", conf: `deviceshare.GPUExclusiveRules: [{app: "a b"}]`,
			wantErr: []string{ArgGPUExclusiveRules + "[0][app]", `"a b"`, "label value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in framework.Arguments
			if err := yaml.Unmarshal([]byte(tt.conf), &in); err != nil {
				t.Fatal(err)
			}
			a, err := Parse(in)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse accepted %s", tt.conf)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, a.ExclusiveRules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if unknown := UnknownKeys(in); len(unknown) > 0 {
				t.Errorf("UnknownKeys = %v", unknown)
			}
		})
	}
}

func TestParseExclusiveRulesTooMany(t *testing.T) {
	rules := make([]interface{}, MaxExclusiveRules+1)
	for i := range rules {
		rules[i] = map[string]interface{}{"app": "a"}
	}
	_, err := Parse(framework.Arguments{ArgGPUExclusiveRules: rules})
	if err == nil || !strings.Contains(err.Error(), ArgGPUExclusiveRules) || !strings.Contains(err.Error(), "64") {
		t.Fatalf("error %v, want one naming %s and the limit 64", err, ArgGPUExclusiveRules)
	}
}
