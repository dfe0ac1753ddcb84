package nodelock

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzParse checks the lock value decoder: a refusal names the value as a
// node lock, an accepted value written back with Format parses to the same
// instant and holder, and Held agrees with Parse (garbage is expired).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"2026-01-02T03:04:05Z",
		"2026-01-02T03:04:05Z,default,pod-a",
		"2026-01-02T03:04:05+08:00,ns,name,extra",
		" 2026-01-02T03:04:05.123Z ,ns",
		"2026-01-02T03:04:05Z,,",
		"not-a-time",
		"1700000000",
		",ns,pod",
		"9999-12-31T23:59:59-23:59",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 6, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		l, err := Parse(value)
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"lock": value}}}
		held := Held(node, "lock", now, 0)
		if err != nil {
			if !strings.Contains(err.Error(), "node lock value") || !strings.Contains(err.Error(), "RFC 3339") {
				t.Errorf("Parse(%q) error %q does not name the lock value and the expected form", value, err)
			}
			if l != (Lock{}) {
				t.Errorf("Parse(%q) returned %+v with an error", value, l)
			}
			if held {
				t.Errorf("Held treats the malformed value %q as a live lock", value)
			}
			return
		}
		if want := now.Sub(l.Since) < DefaultTTL; held != want {
			t.Errorf("Held(%q) = %v, want %v (since %v)", value, held, want, l.Since)
		}
		parts := strings.Split(value, ",")
		var pod types.NamespacedName
		if len(parts) >= 3 {
			pod = types.NamespacedName{Namespace: parts[1], Name: parts[2]}
			if l.Pod != parts[1]+"/"+parts[2] {
				t.Errorf("Parse(%q).Pod = %q, want %q", value, l.Pod, pod.String())
			}
		} else if l.Pod != "" {
			t.Errorf("Parse(%q).Pod = %q without a holder in the value", value, l.Pod)
		}
		// Format writes UTC; a parsed instant before year 1 or after 9999
		// in UTC has no RFC 3339 form. Format is only ever given the
		// clock's now, so such instants cannot be written by us.
		if y := l.Since.UTC().Year(); y < 1 || y > 9999 {
			return
		}
		again, err := Parse(Format(l.Since, pod))
		if err != nil {
			t.Fatalf("Parse(Format(%v, %v)): %v", l.Since, pod, err)
		}
		if !again.Since.Equal(l.Since.Truncate(time.Second)) {
			t.Errorf("round trip of %q: since %v, want %v", value, again.Since, l.Since.Truncate(time.Second))
		}
		if pod.Name != "" && again.Pod != l.Pod {
			t.Errorf("round trip of %q: pod %q, want %q", value, again.Pod, l.Pod)
		}
	})
}
