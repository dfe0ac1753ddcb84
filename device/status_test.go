package device

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCardReasons(t *testing.T) {
	tests := []struct {
		name string
		add  []struct {
			reason     string
			resolvable bool
		}
		wantCode    int
		wantReasons []string
		wantDetail  string
	}{
		{
			name: "only unresolvable causes",
			add: []struct {
				reason     string
				resolvable bool
			}{
				{"GPU card unhealthy", false}, {"GPU card unhealthy", false}, {"GPU card too small", false},
			},
			wantCode: UnschedulableAndUnresolvable, wantReasons: []string{"GPU card too small", "GPU card unhealthy"},
			wantDetail: "GPU card too small x1, GPU card unhealthy x2",
		},
		{
			name: "one resolvable card makes the node resolvable",
			add: []struct {
				reason     string
				resolvable bool
			}{
				{"GPU card unhealthy", false}, {"insufficient GPU memory on card", true},
			},
			wantCode: Unschedulable, wantReasons: []string{"GPU card unhealthy", "insufficient GPU memory on card"},
			wantDetail: "GPU card unhealthy x1, insufficient GPU memory on card x1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c CardReasons
			if !c.Empty() {
				t.Fatal("new CardReasons is not empty")
			}
			for _, a := range tc.add {
				c.Add(a.reason, a.resolvable)
			}
			st := c.Status()
			if st.Code != tc.wantCode || st.IsSuccess() {
				t.Errorf("code = %d, want %d", st.Code, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantReasons, st.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if got := c.Detail(); got != tc.wantDetail {
				t.Errorf("detail = %q, want %q", got, tc.wantDetail)
			}
		})
	}
	var nilStatus *Status
	if !nilStatus.IsSuccess() || nilStatus.Message() != "" {
		t.Error("a nil status must be a silent success")
	}
}

func TestApplyReservationCopies(t *testing.T) {
	orig := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"keep": "1"}}}
	got := ApplyReservation(orig, &Reservation{Annotations: map[string]string{"volcano.sh/gpu-index": "2"}})
	if diff := cmp.Diff(map[string]string{"keep": "1", "volcano.sh/gpu-index": "2"}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"keep": "1"}, orig.Annotations); diff != "" {
		t.Errorf("the original pod was modified (-want +got):\n%s", diff)
	}
	bare := &v1.Pod{}
	if got := ApplyReservation(bare, &Reservation{Annotations: map[string]string{"a": "b"}}); got.Annotations["a"] != "b" {
		t.Errorf("a pod without annotations did not get them: %v", got.Annotations)
	}
}
