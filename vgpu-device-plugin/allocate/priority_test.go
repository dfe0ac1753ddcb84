package allocate

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTaskPriority(t *testing.T) {
	const name = "volcano.sh/vgpu-priority"
	for _, tc := range []struct {
		value   string // "" = not named
		want    string
		wantOK  bool
		wantErr string
	}{
		{value: "", wantOK: false},
		{value: "0", want: "0", wantOK: true},
		{value: "1", want: "1", wantOK: true},
		{value: "2", wantErr: "volcano.sh/vgpu-priority=2: want 0 (high priority) or 1 (low priority)"},
		{value: "-1", wantErr: "volcano.sh/vgpu-priority=-1: want 0"},
		{value: "500m", wantErr: "volcano.sh/vgpu-priority=500m: want 0"},
	} {
		t.Run("value "+tc.value, func(t *testing.T) {
			ctr := &v1.Container{Name: "main", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}}}
			if tc.value != "" {
				ctr.Resources.Limits[name] = resource.MustParse(tc.value)
			}
			got, ok, err := taskPriority(ctr, name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "container main") ||
					!errors.Is(err, ErrPriority) {
					t.Fatalf("err = %v, want one naming container main and containing %q (ErrPriority)", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || ok != tc.wantOK {
				t.Errorf("taskPriority = %q, %v, %v; want %q, %v, nil", got, ok, err, tc.want, tc.wantOK)
			}
		})
	}
}
