package cardledger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/device"
)

const testAnnotation = "example.com/cards"

// take is one card of a test holding.
type take struct {
	card  int
	mem   int64
	cores int32
}

// testHolding is what a test record "card:mem:cores,..." holds.
type testHolding struct {
	takes []take
}

func (h *testHolding) Total() Total {
	return Sum(h.takes, func(t *take) (int64, int32) { return t.mem, t.cores })
}

// testNode is a test backend's node: its cards and pods.
type testNode struct {
	cards []Usage
	pods  Ledger[*testHolding]
}

var testSpec = Spec{
	Device: "test", Annotation: testAnnotation,
	Count: "example.com/card", Memory: "example.com/card-memory", Cores: "example.com/card-cores", Factor: 1024,
	Asks:    func(pod *v1.Pod) bool { return pod.Labels["asks"] == "true" },
	Ignored: []string{"example.com/card-memory", "example.com/card-cores"},
}

func newNode(cards int) *testNode {
	desc := make([]Card, cards)
	for i := range desc {
		desc[i] = Card{ID: "card-" + strconv.Itoa(i), Healthy: true, MemMiB: 8192, Cores: 100, MaxPods: 4}
	}
	return &testNode{cards: make([]Usage, cards), pods: NewLedger[*testHolding](testSpec, "n1", desc, v1.ResourceList{})}
}

func (n *testNode) apply(h *testHolding, sign int32) {
	for _, t := range h.takes {
		n.cards[t.card].Take(t.mem, t.cores, sign)
	}
}

// decode reads a test record; it refuses unknown cards.
func (n *testNode) decode(value string) (*testHolding, error) {
	h := &testHolding{}
	for _, e := range strings.Split(value, ",") {
		f := strings.Split(e, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("entry %q: want card:mem:cores", e)
		}
		c, err1 := strconv.Atoi(f[0])
		mem, err2 := strconv.ParseInt(f[1], 10, 64)
		cores, err3 := strconv.ParseInt(f[2], 10, 32)
		if err := errors.Join(err1, err2, err3); err != nil || c < 0 || c >= len(n.cards) {
			return nil, fmt.Errorf("entry %q: want card:mem:cores with a card below %d", e, len(n.cards))
		}
		h.takes = append(h.takes, take{card: c, mem: mem, cores: int32(cores)})
	}
	return h, nil
}

func (n *testNode) add(pod *v1.Pod) (bool, error) { return Account(n.pods, pod, n.decode, n.apply) }

func testPod(name, record string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	if record != "" {
		pod.Annotations = map[string]string{testAnnotation: record}
	}
	return pod
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want types.UID
	}{
		{name: "uid", pod: testPod("a", ""), want: "uid-a"},
		{name: "no uid", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}, want: "ns/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Key(tc.pod); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAccount(t *testing.T) {
	finished := testPod("done", "0:100:10")
	finished.Status.Phase = v1.PodSucceeded
	for _, tc := range []struct {
		name string
		// before are pods accounted first.
		before    []*v1.Pod
		pod       *v1.Pod
		wantAdded bool
		// wantErr lists what the error must name; nil: no error.
		wantErr []string
		want    []Usage
	}{
		{name: "new pod", pod: testPod("a", "0:100:10,1:200:20"), wantAdded: true,
			want: []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}, {UsedMiB: 200, UsedCores: 20, UsedNum: 1}}},
		{name: "no annotation", pod: testPod("a", ""), want: []Usage{{}, {}}},
		{name: "finished pod", pod: finished, want: []Usage{{}, {}}},
		{name: "same record again", before: []*v1.Pod{testPod("a", "0:100:10")}, pod: testPod("a", "0:100:10"),
			want: []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}, {}}},
		{name: "other record for an accounted pod", before: []*v1.Pod{testPod("a", "0:100:10")}, pod: testPod("a", "1:100:10"),
			wantErr: []string{"ns/a", testAnnotation, `"1:100:10"`, "already accounted", "n1", `"0:100:10"`},
			want:    []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}, {}}},
		{name: "malformed record", pod: testPod("a", "0:100:10,7:1:1"),
			wantErr: []string{"ns/a", "n1", testAnnotation, `"0:100:10,7:1:1"`, "card below 2"}, want: []Usage{{}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(2)
			for _, p := range tc.before {
				if _, err := n.add(p); err != nil {
					t.Fatalf("Account(%s): %v", p.Name, err)
				}
			}
			added, err := n.add(tc.pod)
			n.check(t, "added", added, tc.wantAdded, err, tc.wantErr, tc.want)
		})
	}
}

func TestCheckNew(t *testing.T) {
	n := newNode(1)
	if err := CheckNew(n.pods, testPod("a", "")); err != nil {
		t.Fatalf("CheckNew of a pod holding nothing: %v", err)
	}
	Hold(n.pods, testPod("a", ""), "0:1:1", &testHolding{takes: []take{{0, 1, 1}}}, n.apply)
	checkErr(t, CheckNew(n.pods, testPod("a", "")), []string{"allocate test", "ns/a", "n1", `already holds "0:1:1"`})
}

func TestRelease(t *testing.T) {
	reservation := func(record string) *device.Reservation {
		return &device.Reservation{Annotations: map[string]string{testAnnotation: record}}
	}
	for _, tc := range []struct {
		name         string
		held         string
		r            *device.Reservation
		wantReleased bool
		wantErr      []string
		want         []Usage
	}{
		{name: "what the pod holds", held: "0:100:10", r: reservation("0:100:10"), wantReleased: true, want: []Usage{{}}},
		{name: "nil reservation", held: "0:100:10", want: []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}}},
		{name: "reservation without the annotation", held: "0:100:10", r: &device.Reservation{},
			want: []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}}},
		{name: "another record", held: "0:100:10", r: reservation("0:50:10"),
			wantErr: []string{"release test", "ns/a", testAnnotation, `"0:50:10"`, `holds "0:100:10"`, "n1"},
			want:    []Usage{{UsedMiB: 100, UsedCores: 10, UsedNum: 1}}},
		{name: "pod holding nothing", r: reservation("0:100:10"),
			wantErr: []string{"release test", "ns/a", testAnnotation, "holds no cards", "n1"}, want: []Usage{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(1)
			if tc.held != "" {
				if _, err := n.add(testPod("a", tc.held)); err != nil {
					t.Fatalf("Account: %v", err)
				}
			}
			released, err := Release(n.pods, testPod("a", ""), tc.r, n.apply)
			n.check(t, "released", released, tc.wantReleased, err, tc.wantErr, tc.want)
		})
	}
}

// TestAccountDropInverse checks the property every backend relies on:
// accounting pods and dropping them in any order restores the cards.
func TestAccountDropInverse(t *testing.T) {
	n := newNode(3)
	records := []string{"0:100:10", "0:50:0,1:50:0", "2:4096:100", "1:1:1,2:2:2,0:3:3"}
	var pods []*v1.Pod
	for i, r := range records {
		pod := testPod("p"+strconv.Itoa(i), r)
		if _, err := n.add(pod); err != nil {
			t.Fatalf("Account(%q): %v", r, err)
		}
		pods = append(pods, pod)
	}
	copied := Clone(n.pods)
	for _, i := range []int{2, 0, 3, 1} {
		if _, found := n.pods.pods.Drop(pods[i], applied(n.apply)); !found {
			t.Fatalf("Drop(%s): not found", pods[i].Name)
		}
	}
	if diff := cmp.Diff(make([]Usage, 3), n.cards); diff != "" {
		t.Errorf("cards after dropping every pod (-want +got):\n%s", diff)
	}
	if n.pods.pods.Len() != 0 || copied.pods.Len() != len(records) {
		t.Errorf("Len = %d, clone's %d; want 0 and %d (a clone is independent)", n.pods.pods.Len(), copied.pods.Len(), len(records))
	}
	if _, found := n.pods.pods.Drop(pods[0], applied(n.apply)); found {
		t.Errorf("Drop of a dropped pod found a holding")
	}
}

func TestAddQueueResource(t *testing.T) {
	n := newNode(2)
	if got := n.pods.AddQueueResource(testPod("a", "")); got != nil {
		t.Errorf("AddQueueResource of a pod holding nothing = %v, want nil", got)
	}
	if _, err := n.add(testPod("a", "0:3000:30,1:2000:20")); err != nil {
		t.Fatalf("Account: %v", err)
	}
	want := map[string]float64{"example.com/card": 2, "example.com/card-memory": 4, "example.com/card-cores": 50}
	if diff := cmp.Diff(want, n.pods.AddQueueResource(testPod("a", ""))); diff != "" {
		t.Errorf("AddQueueResource (-want +got):\n%s", diff)
	}
}

func TestCardUsage(t *testing.T) {
	n := newNode(2)
	if _, err := n.add(testPod("a", "1:1024:30")); err != nil {
		t.Fatalf("Account: %v", err)
	}
	cards, pods := CardUsage(n.pods, n.cards)
	want := []device.CardUsage{
		{ID: "card-0", Index: 0, Healthy: true, MemoryTotalMiB: 8192, CoresTotal: 100, MaxPods: 4},
		{ID: "card-1", Index: 1, Healthy: true, MemoryUsedMiB: 1024, MemoryTotalMiB: 8192, CoresUsed: 30, CoresTotal: 100,
			Pods: 1, MaxPods: 4},
	}
	if diff := cmp.Diff(want, cards); diff != "" || pods != 1 {
		t.Errorf("CardUsage: %d pods, want 1; cards (-want +got):\n%s", pods, diff)
	}
}

func TestSpecMethods(t *testing.T) {
	n := newNode(1)
	asking := testPod("a", "")
	asking.Labels = map[string]string{"asks": "true"}
	if !n.pods.HasDeviceRequest(asking) || n.pods.HasDeviceRequest(testPod("b", "")) {
		t.Errorf("HasDeviceRequest does not follow Spec.Asks")
	}
	ignored := n.pods.GetIgnoredDevices()
	ignored[0] = "changed"
	if diff := cmp.Diff(testSpec.Ignored, n.pods.GetIgnoredDevices()); diff != "" {
		t.Errorf("GetIgnoredDevices is not a copy of Spec.Ignored (-want +got):\n%s", diff)
	}
}

func TestReport(t *testing.T) {
	cards := []Card{{ID: "GPU-0", Type: "A100", Healthy: true, MemMiB: 40960, Cores: 100, MaxPods: 10}, {ID: "GPU-1"}}
	used := []Usage{{UsedMiB: 1024, UsedCores: 30, UsedNum: 2}, {}}
	got := Report(len(cards), func(i int) (Card, Usage) { return cards[i], used[i] })
	want := []device.CardUsage{
		{ID: "GPU-0", Index: 0, Type: "A100", Healthy: true, MemoryUsedMiB: 1024, MemoryTotalMiB: 40960,
			CoresUsed: 30, CoresTotal: 100, Pods: 2, MaxPods: 10},
		{ID: "GPU-1", Index: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
}

// check checks one call's outcome: its error (see checkErr), its boolean
// result (named name) and the cards after it.
func (n *testNode) check(t *testing.T, name string, got, want bool, err error, wantErr []string, cards []Usage) {
	t.Helper()
	checkErr(t, err, wantErr)
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
	if diff := cmp.Diff(cards, n.cards); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
}

// checkErr fails unless err names every part of want (nil want: no error).
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != nil && err == nil:
		t.Fatalf("no error, want one naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
}
