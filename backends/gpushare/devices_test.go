package gpushare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

func TestAddResource(t *testing.T) {
	succeeded := placed(sharePod("done", 4096), "0")
	succeeded.Status.Phase = v1.PodSucceeded
	failed := placed(numberPod("failed", 1), "0")
	failed.Status.Phase = v1.PodFailed
	sidecarPod := placed(sharePod("sc", 1000), "2")
	sidecarPod.Spec.InitContainers = []v1.Container{sidecar(container("s", gpushareproto.ResourceGPUMemory, "500"))}
	tests := []struct {
		name      string
		mode      Mode
		unhealthy string // volcano.sh/gpu-unhealthy-ids of the node
		pods      []*v1.Pod
		want      []CardStatus
	}{
		{name: "share pod", mode: ModeShare, pods: []*v1.Pod{placed(sharePod("a", 1024, 2048), "1")},
			want: withCard(cards(4, 16384), 1, 3072, 1, 0)},
		{name: "two share pods on a card", mode: ModeShare,
			pods: []*v1.Pod{placed(sharePod("a", 1024), "3"), placed(sharePod("b", 4096), "3")},
			want: withCard(cards(4, 16384), 3, 5120, 2, 0)},
		{name: "share pod with a sidecar", mode: ModeShare, pods: []*v1.Pod{sidecarPod},
			want: withCard(cards(4, 16384), 2, 1500, 1, 0)},
		{name: "number pod", mode: ModeNumber, pods: []*v1.Pod{placed(numberPod("a", 2), "0,2")},
			want: withCard(withCard(cards(4, 16384), 0, 0, 0, 1), 2, 0, 0, 1)},
		{name: "number pod seen by the share mode", mode: ModeShare, pods: []*v1.Pod{placed(numberPod("a", 1), "2")},
			want: withCard(cards(4, 16384), 2, 0, 0, 1)},
		{name: "share pod seen by the number mode", mode: ModeNumber, pods: []*v1.Pod{placed(sharePod("a", 10), "1")},
			want: withCard(cards(4, 16384), 1, 10, 1, 0)},
		{name: "succeeded and failed pods hold nothing", mode: ModeShare, pods: []*v1.Pod{succeeded, failed},
			want: cards(4, 16384)},
		{name: "pod without gpu-index", mode: ModeShare, pods: []*v1.Pod{sharePod("pending", 1024)},
			want: cards(4, 16384)},
		{name: "pod without request", mode: ModeShare, pods: []*v1.Pod{placed(sharePod("none"), "1")},
			want: cards(4, 16384)},
		{name: "same pod added twice is counted once", mode: ModeShare,
			pods: []*v1.Pod{placed(sharePod("a", 1024), "0"), placed(sharePod("a", 1024), "0")},
			want: withCard(cards(4, 16384), 0, 1024, 1, 0)},
		{name: "pod on an unhealthy card is still counted", mode: ModeShare, unhealthy: "1",
			pods: []*v1.Pod{placed(sharePod("a", 1024), "1")},
			want: withCard(cards(4, 16384, 1), 1, 1024, 1, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := fourCards(gpushareproto.AnnotationUnhealthyIDs, tc.unhealthy)
			b := newBackend(t, tc.mode)
			empty := devicesOf(t, b, node).Cards()
			d := devicesOf(t, b, node, tc.pods...)
			if diff := cmp.Diff(tc.want, d.Cards()); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
			for _, p := range tc.pods {
				if err := d.SubResource(p); err != nil {
					t.Fatalf("SubResource(%s): %v", p.Name, err)
				}
			}
			if diff := cmp.Diff(empty, d.Cards()); diff != "" {
				t.Errorf("cards after SubResource of every pod (-want +got):\n%s", diff)
			}
		})
	}
}

// withCard sets card i's usage.
func withCard(cs []CardStatus, i int, used int64, share, number int) []CardStatus {
	cs[i].UsedMemory, cs[i].SharePods, cs[i].NumberPods = used, share, number
	return cs
}

func TestAddResourceRejectsBadIndex(t *testing.T) {
	tests := []struct {
		name  string
		mode  Mode
		pod   *v1.Pod
		value string
		want  string
	}{
		{name: "not a number", mode: ModeShare, pod: sharePod("p", 1024), value: "gpu0", want: `entry "gpu0"`},
		{name: "empty", mode: ModeShare, pod: sharePod("p", 1024), value: "", want: "is empty"},
		{name: "negative", mode: ModeShare, pod: sharePod("p", 1024), value: "-1", want: `entry "-1"`},
		{name: "out of range", mode: ModeShare, pod: sharePod("p", 1024), value: "4", want: "[0, 3]"},
		{name: "spaces", mode: ModeShare, pod: sharePod("p", 1024), value: " 1", want: `entry " 1"`},
		{name: "decimal", mode: ModeShare, pod: sharePod("p", 1024), value: "1.0", want: `entry "1.0"`},
		{name: "share pod with two cards", mode: ModeShare, pod: sharePod("p", 1024), value: "0,1",
			want: "lists 2 cards; want 1"},
		{name: "number: too few cards", mode: ModeNumber, pod: numberPod("p", 2), value: "0",
			want: "lists 1 cards; want 2"},
		{name: "number: too many cards", mode: ModeNumber, pod: numberPod("p", 1), value: "0,1",
			want: "lists 2 cards; want 1"},
		{name: "number: duplicate", mode: ModeNumber, pod: numberPod("p", 2), value: "1,1",
			want: "card 1 is listed twice"},
		{name: "number: empty entry", mode: ModeNumber, pod: numberPod("p", 2), value: "1,", want: `entry ""`},
		{name: "number: more cards than the node has", mode: ModeNumber, pod: numberPod("p", 5), value: "0,1,2,3,4",
			want: "asks for 5 cards but the node has 4"},
		{name: "number: invalid request", mode: ModeNumber, pod: numberPod("p", -1), value: "0",
			want: "volcano.sh/gpu-number=-1"},
		{name: "already accounted elsewhere", mode: ModeShare, pod: sharePod("held", 1024), value: "2",
			want: "already accounted on cards 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, tc.mode), fourCards(),
				placed(sharePod("other", 2048), "1"), placed(sharePod("held", 1024), "0"))
			before := d.GetStatus()
			err := d.AddResource(placed(tc.pod, tc.value))
			if err == nil {
				t.Fatalf("AddResource(%s=%q) accepted", gpushareproto.AnnotationGPUIndex, tc.value)
			}
			for _, s := range []string{gpushareproto.AnnotationGPUIndex, tc.want} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), `"`+tc.value+`"`) && !strings.Contains(err.Error(), "gpu-number=-1") {
				t.Errorf("error %q does not quote the value %q", err, tc.value)
			}
			if got := d.GetStatus(); got != before {
				t.Errorf("state changed by a refused AddResource:\nbefore %s\nafter  %s", before, got)
			}
		})
	}
}

func TestSubResourceOfUnknownPod(t *testing.T) {
	d := devicesOf(t, newBackend(t, ModeShare), fourCards(), placed(sharePod("a", 1024), "0"))
	before := d.GetStatus()
	for _, p := range []*v1.Pod{sharePod("never", 1024), placed(sharePod("never", 1024), "0"), numberPod("x", 1)} {
		if err := d.SubResource(p); err != nil {
			t.Errorf("SubResource(%s): %v, want nil", p.Name, err)
		}
	}
	if got := d.GetStatus(); got != before {
		t.Errorf("SubResource of unknown pods changed the state:\nbefore %s\nafter  %s", before, got)
	}
}

func TestSubResourceRemovesWhatWasAdded(t *testing.T) {
	d := devicesOf(t, newBackend(t, ModeShare), fourCards(), placed(sharePod("a", 1024), "0"))
	// The pod's annotation changed after it was accounted: Sub removes the
	// recorded holding, not what the annotation says now.
	if err := d.SubResource(placed(sharePod("a", 1024), "3")); err != nil {
		t.Fatalf("SubResource: %v", err)
	}
	if diff := cmp.Diff(cards(4, 16384), d.Cards()); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
}

func TestAddQueueResource(t *testing.T) {
	share := placed(sharePod("s", 1024, 512), "0")
	number := placed(numberPod("n", 2), "1,2")
	tests := []struct {
		name string
		mode Mode
		pod  *v1.Pod
		want map[string]float64
	}{
		{name: "share pod in share mode", mode: ModeShare, pod: share, want: map[string]float64{"volcano.sh/gpu-memory": 1536}},
		{name: "number pod in number mode", mode: ModeNumber, pod: number, want: map[string]float64{"volcano.sh/gpu-number": 2}},
		{name: "number pod in share mode", mode: ModeShare, pod: number},
		{name: "share pod in number mode", mode: ModeNumber, pod: share},
		{name: "pod not accounted", mode: ModeShare, pod: sharePod("other", 1024)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, tc.mode), fourCards(), share, number)
			if diff := cmp.Diff(tc.want, d.AddQueueResource(tc.pod)); diff != "" {
				t.Errorf("AddQueueResource (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetStatusAndIgnoredDevices(t *testing.T) {
	d := devicesOf(t, newBackend(t, ModeShare), gpuNode("3", "3000", gpushareproto.AnnotationUnhealthyIDs, "2"),
		placed(sharePod("a", 100), "0"), placed(sharePod("b", 200), "0"), placed(numberPod("c", 1), "1"))
	want := "0: 300/1000 MiB, 2 shared, 0 whole; 1: 0/1000 MiB, 0 shared, 1 whole; 2: 0/1000 MiB, 0 shared, 0 whole, unhealthy"
	if got := d.GetStatus(); got != want {
		t.Errorf("GetStatus = %q, want %q", got, want)
	}
	if got := d.GetIgnoredDevices(); got != nil {
		t.Errorf("GetIgnoredDevices = %v, want nil", got)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	d := devicesOf(t, newBackend(t, ModeShare), fourCards(), placed(sharePod("a", 1024), "0"))
	cp := d.DeepCopy()
	if err := cp.AddResource(placed(sharePod("b", 2048), "0")); err != nil {
		t.Fatal(err)
	}
	if err := cp.SubResource(sharePod("a", 1024)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(withCard(cards(4, 16384), 0, 1024, 1, 0), d.Cards()); diff != "" {
		t.Errorf("original after changing the copy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(withCard(cards(4, 16384), 0, 2048, 1, 0), cp.(*Devices).Cards()); diff != "" {
		t.Errorf("copy (-want +got):\n%s", diff)
	}
}
