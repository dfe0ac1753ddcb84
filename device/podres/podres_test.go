package podres

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const res = v1.ResourceName("example.com/widget")

func TestWhole(t *testing.T) {
	ctr := func(limit, request string) *v1.Container {
		c := &v1.Container{Name: "main"}
		if limit != "" {
			c.Resources.Limits = v1.ResourceList{res: resource.MustParse(limit)}
		}
		if request != "" {
			c.Resources.Requests = v1.ResourceList{res: resource.MustParse(request)}
		}
		return c
	}
	tests := []struct {
		name        string
		c           *v1.Container
		want        int64
		wantPresent bool
		wantErr     string
	}{
		{name: "absent", c: ctr("", "")},
		{name: "limit wins over request", c: ctr("3", "2"), want: 3, wantPresent: true},
		{name: "request when no limit", c: ctr("", "2"), want: 2, wantPresent: true},
		{name: "zero is present", c: ctr("0", ""), wantPresent: true},
		{name: "at the bound", c: ctr("100", ""), want: 100, wantPresent: true},
		{name: "above the bound", c: ctr("101", ""), wantPresent: true, wantErr: `container "main": example.com/widget=101: want a whole number in [0, 100]`},
		{name: "fractional", c: ctr("500m", ""), wantPresent: true, wantErr: "example.com/widget=500m"},
		{name: "whole number in big-decimal form", c: ctr("1.000000000000000000000", ""), want: 1, wantPresent: true},
		{name: "fraction in big-decimal form", c: ctr("1.000000000000000000001", ""), wantPresent: true, wantErr: "example.com/widget="},
		{name: "zero in big-decimal form", c: ctr("0e-30", ""), wantPresent: true},
		{name: "huge exponent", c: ctr("1e99999", ""), wantPresent: true, wantErr: "example.com/widget=1e99999"},
		{name: "negative", c: ctr("-1", ""), wantPresent: true, wantErr: "example.com/widget=-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, present, err := Whole(tc.c, res, 100)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Whole error = %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Whole: %v", err)
			}
			if got != tc.want || present != tc.wantPresent {
				t.Errorf("Whole = %d, %v; want %d, %v", got, present, tc.want, tc.wantPresent)
			}
		})
	}
}
