package gpushareproto

import "testing"

func TestIndexIs(t *testing.T) {
	tests := []struct {
		name  string
		value string
		ids   []int
		want  bool
	}{
		{name: "one", value: "3", ids: []int{3}, want: true},
		{name: "list", value: "0,2,5", ids: []int{0, 2, 5}, want: true},
		{name: "order matters", value: "2,0", ids: []int{0, 2}},
		{name: "longer value", value: "0,2", ids: []int{0}},
		{name: "shorter value", value: "0", ids: []int{0, 2}},
		{name: "trailing comma", value: "0,", ids: []int{0}},
		{name: "empty", value: "", ids: nil},
		{name: "garbage", value: "a", ids: []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IndexIs(tc.value, tc.ids); got != tc.want {
				t.Errorf("IndexIs(%q, %v) = %v, want %v", tc.value, tc.ids, got, tc.want)
			}
		})
	}
}
