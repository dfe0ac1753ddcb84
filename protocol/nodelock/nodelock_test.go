package nodelock

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestFormatParseRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		pod     types.NamespacedName
		want    string
		wantPod string
	}{
		{name: "upstream Volcano form, time only", want: "2026-11-22T10:00:00Z"},
		{name: "HAMi form with the pod", pod: types.NamespacedName{Namespace: "ns", Name: "p"},
			want: "2026-11-22T10:00:00Z,ns,p", wantPod: "ns/p"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Format(now, tc.pod)
			if got != tc.want {
				t.Fatalf("Format = %q, want %q", got, tc.want)
			}
			l, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(%q): %v", got, err)
			}
			if !l.Since.Equal(now) || l.Pod != tc.wantPod {
				t.Errorf("Parse(%q) = %+v, want since %v pod %q", got, l, now, tc.wantPod)
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, v := range []string{"", "yesterday", "10:00,ns,p"} {
		if _, err := Parse(v); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("Parse(%q) error = %v, want one saying RFC 3339", v, err)
		}
	}
}

func TestHeld(t *testing.T) {
	node := func(value string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{}}}
		if value != "" {
			n.Annotations["gpu"] = value
		}
		return n
	}
	tests := []struct {
		name string
		node *v1.Node
		ttl  time.Duration
		want bool
	}{
		{name: "no node", node: nil, want: false},
		{name: "no lock", node: node(""), want: false},
		{name: "fresh lock", node: node(Format(now.Add(-time.Minute), types.NamespacedName{})), want: true},
		{name: "just before expiry", node: node(Format(now.Add(-DefaultTTL+time.Second), types.NamespacedName{})), want: true},
		{name: "expired", node: node(Format(now.Add(-DefaultTTL), types.NamespacedName{})), want: false},
		{name: "malformed counts as expired", node: node("garbage"), want: false},
		{name: "shorter TTL: fresh", node: node(Format(now.Add(-29*time.Second), types.NamespacedName{})), ttl: 30 * time.Second, want: true},
		{name: "shorter TTL: expired", node: node(Format(now.Add(-30*time.Second), types.NamespacedName{})), ttl: 30 * time.Second, want: false},
		{name: "longer TTL outlives the default", node: node(Format(now.Add(-DefaultTTL), types.NamespacedName{})), ttl: time.Hour, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Held(tc.node, "gpu", now, tc.ttl); got != tc.want {
				t.Errorf("Held = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTaken(t *testing.T) {
	if got := FormatTaken([]string{"hamivgpu", "hamivnpu", "hamivgpu"}); got != "hamivgpu,hamivnpu" {
		t.Errorf("FormatTaken = %q, want sorted and distinct", got)
	}
	if got := FormatTaken(nil); got != "" {
		t.Errorf("FormatTaken(nil) = %q, want empty", got)
	}
	for _, tc := range []struct {
		value, key string
		want       bool
	}{
		{"hamivgpu", "hamivgpu", true},
		{"hamivgpu,hamivnpu", "hamivnpu", true},
		{"", "hamivgpu", false},
		{"hamivgpu-x", "hamivgpu", false},
		{"hamivnpu", "hamivgpu", false},
		{"", "", false},
	} {
		if got := Taken(tc.value, tc.key); got != tc.want {
			t.Errorf("Taken(%q, %q) = %v, want %v", tc.value, tc.key, got, tc.want)
		}
	}
}
