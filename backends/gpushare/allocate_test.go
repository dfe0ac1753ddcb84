package gpushare

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

func TestAllocateShareCardChoice(t *testing.T) {
	// Free memory per card: 0: 8192, 1: 4096, 2: 16384 (unhealthy), 3: 4096, 4: 16384, 5: 16384.
	node := gpuNode("6", "98304", gpushareproto.AnnotationUnhealthyIDs, "2")
	held := []*v1.Pod{
		placed(sharePod("a", 8192), "0"), placed(sharePod("b", 12288), "1"), placed(sharePod("c", 12288), "3"),
	}
	tests := []struct {
		name   string
		policy string
		req    int64
		want   string
	}{
		{name: "binpack takes the fullest card that fits, lowest index on ties", policy: device.PolicyBinpack, req: 4096,
			want: "1"},
		{name: "binpack skips cards that are too full", policy: device.PolicyBinpack, req: 4097, want: "0"},
		{name: "binpack needs an empty card", policy: device.PolicyBinpack, req: 9000, want: "4"},
		{name: "empty policy is binpack", policy: "", req: 4096, want: "1"},
		{name: "unknown policy is binpack", policy: "least", req: 4096, want: "1"},
		{name: "spread takes the emptiest healthy card, lowest index on ties", policy: device.PolicySpread, req: 1024,
			want: "4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, ModeShare), node, held...)
			r, err := d.Allocate(sharePod("p", tc.req), tc.policy)
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			want := map[string]string{
				gpushareproto.AnnotationGPUIndex:      tc.want,
				gpushareproto.AnnotationPredicateTime: strconv.FormatInt(testUnixNano, 10),
			}
			if diff := cmp.Diff(want, r.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllocateNumberCardChoice(t *testing.T) {
	tests := []struct {
		name string
		held []*v1.Pod
		req  int64
		want string
	}{
		{name: "lowest indices", req: 2, want: "0,1"},
		{name: "all cards but the unhealthy one", req: 5, want: "0,1,3,4,5"},
		{name: "skips cards held by share and number pods",
			held: []*v1.Pod{placed(sharePod("s", 1), "0"), placed(numberPod("n", 2), "3,1")}, req: 2, want: "4,5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, policy := range []string{device.PolicyBinpack, device.PolicySpread} {
				d := devicesOf(t, newBackend(t, ModeNumber), gpuNode("6", "", gpushareproto.AnnotationUnhealthyIDs, "2"), tc.held...)
				r, err := d.Allocate(numberPod("p", tc.req), policy)
				if err != nil {
					t.Fatalf("Allocate(%s): %v", policy, err)
				}
				if got := r.Annotations[gpushareproto.AnnotationGPUIndex]; got != tc.want {
					t.Errorf("Allocate(%s) gpu-index = %q, want %q", policy, got, tc.want)
				}
			}
		})
	}
}

func TestAnnotationRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
		pod  *v1.Pod
	}{
		{name: "share", mode: ModeShare, pod: sharePod("p", 3000, 1000)},
		{name: "number", mode: ModeNumber, pod: numberPod("p", 2, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.mode)
			base := devicesOf(t, b, fourCards(), placed(sharePod("other", 1000), "1"))
			allocated := base.DeepCopy().(*Devices)
			r, err := allocated.Allocate(tc.pod, device.PolicyBinpack)
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			annotated := device.ApplyReservation(tc.pod, r)
			readBack := base.DeepCopy().(*Devices)
			if err := readBack.AddResource(annotated); err != nil {
				t.Fatalf("AddResource: %v", err)
			}
			if diff := cmp.Diff(allocated.Cards(), readBack.Cards()); diff != "" {
				t.Errorf("cards after AddResource vs after Allocate (-want +got):\n%s", diff)
			}
			if err := readBack.Release(tc.pod, r); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if diff := cmp.Diff(base.Cards(), readBack.Cards()); diff != "" {
				t.Errorf("cards after Release (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllocateFailures(t *testing.T) {
	tests := []struct {
		name string
		mode Mode
		pod  *v1.Pod
		want []string
	}{
		{name: "share: no card fits", mode: ModeShare, pod: sharePod("p", 16000),
			want: []string{"pod ns/p (request 16000) on node node-a", ReasonInsufficientMemory}},
		{name: "number: no idle cards", mode: ModeNumber, pod: numberPod("p", 4),
			want: []string{ReasonNotEnoughIdleCards}},
		{name: "already allocated", mode: ModeShare, pod: sharePod("held", 1), want: []string{"already holds cards 0"}},
		{name: "invalid request", mode: ModeNumber, pod: numberPod("p", -2),
			want: []string{"volcano.sh/gpu-number=-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, tc.mode), fourCards(),
				placed(sharePod("held", 1024), "0"), placed(sharePod("other", 1024), "1"),
				placed(sharePod("x", 1024), "2"), placed(sharePod("y", 1024), "3"))
			before := d.GetStatus()
			r, err := d.Allocate(tc.pod, device.PolicyBinpack)
			if err == nil {
				t.Fatalf("Allocate = %v, want an error", r)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if got := d.GetStatus(); got != before {
				t.Errorf("failed Allocate changed the state:\nbefore %s\nafter  %s", before, got)
			}
		})
	}
}

func TestAllocateWithoutRequest(t *testing.T) {
	d := devicesOf(t, newBackend(t, ModeShare), fourCards())
	r, err := d.Allocate(numberPod("p", 1), device.PolicyBinpack)
	if r != nil || err != nil {
		t.Errorf("Allocate of a pod without a share request = %v, %v; want nil, nil", r, err)
	}
	if err := d.Release(numberPod("p", 1), nil); err != nil {
		t.Errorf("Release with a nil reservation: %v", err)
	}
}

func TestReleaseRejectsMismatch(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		value string
		want  string
	}{
		{name: "other card", pod: sharePod("held", 1024), value: "1", want: `the pod holds cards "0"`},
		{name: "malformed", pod: sharePod("held", 1024), value: "x", want: `the pod holds cards "0"`},
		{name: "not accounted", pod: sharePod("new", 1024), value: "0", want: "the pod holds no cards"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, ModeShare), fourCards(), placed(sharePod("held", 1024), "0"))
			before := d.GetStatus()
			err := d.Release(tc.pod, &device.Reservation{Annotations: map[string]string{gpushareproto.AnnotationGPUIndex: tc.value}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), gpushareproto.AnnotationGPUIndex) {
				t.Fatalf("Release: %v, want an error naming %s and containing %q", err, gpushareproto.AnnotationGPUIndex, tc.want)
			}
			if got := d.GetStatus(); got != before {
				t.Errorf("refused Release changed the state:\nbefore %s\nafter  %s", before, got)
			}
		})
	}
}
