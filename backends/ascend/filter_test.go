package ascend

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

func TestFilterNodeReasons(t *testing.T) {
	keys := ascendproto.KeysFor("Ascend910B3")
	tests := []struct {
		name     string
		cards    []card
		node     []string
		held     []*v1.Pod
		pod      *v1.Pod
		wantCode int
		want     []string
	}{
		{
			name:  "fits",
			cards: []card{npu("NPU-0", 65536)},
			pod:   npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}}),
		},
		{
			name:     "unhealthy and wrong type cards",
			cards:    []card{npu("NPU-0", 65536).unhealthy(), npu("NPU-1", 65536).withType("Ascend310P")},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}}),
			wantCode: device.UnschedulableAndUnresolvable,
			want:     []string{ReasonTypeMismatch, ReasonUnhealthy},
		},
		{
			name:     "use-uuid keeps only the named card, which is full",
			cards:    []card{npu("NPU-0", 65536).withCount(0), npu("NPU-1", 65536)},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}}, keys.UseUUID, "NPU-0"),
			wantCode: device.Unschedulable,
			want:     []string{ReasonUUIDExcluded, ReasonCountFull},
		},
		{
			name:     "no-use-uuid excludes",
			cards:    []card{npu("NPU-0", 65536)},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}}, keys.NoUseUUID, "NPU-1, NPU-0"),
			wantCode: device.UnschedulableAndUnresolvable,
			want:     []string{ReasonUUIDExcluded},
		},
		{
			name:     "hami-core pod on a template node",
			cards:    []card{npu("NPU-0", 65536)},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: 20}}),
			wantCode: device.UnschedulableAndUnresolvable,
			want:     []string{ReasonModeMismatch},
		},
		{
			name:     "template larger than a small card",
			cards:    []card{npu("NPU-0", 8192)},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}}),
			wantCode: device.UnschedulableAndUnresolvable,
			want:     []string{ReasonCardTooSmall},
		},
		{
			name:     "more cards than the node has",
			cards:    []card{npu("NPU-0", 65536)},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 2, mem: -1, cores: -1}}),
			wantCode: device.UnschedulableAndUnresolvable,
			want:     []string{ReasonTooFewCards},
		},
		{
			name:     "a whole card asked of a sliced card",
			cards:    []card{npu("NPU-0", 65536)},
			held:     []*v1.Pod{npuPod("h", "Ascend910B3", []ctr{{n: 1, mem: 1024, cores: -1}})},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: -1, cores: -1}}),
			wantCode: device.Unschedulable,
			want:     []string{ReasonWholeBusy},
		},
		{
			name:  "hami-core: cores 100 needs an unused card",
			cards: []card{npu("NPU-0", 65536), npu("NPU-1", 65536), npu("NPU-2", 65536)},
			node:  []string{ascendproto.AnnotationNodeHAMiCore, "true"},
			held: []*v1.Pod{
				npuPod("h0", "Ascend910B3", []ctr{{n: 1, mem: 60000, cores: 10}}, keys.UseUUID, "NPU-0"),
				npuPod("h1", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: 90}}, keys.UseUUID, "NPU-1"),
				npuPod("h2", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: 1}}, keys.UseUUID, "NPU-2"),
			},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 8000, cores: 100}}),
			wantCode: device.Unschedulable,
			want:     []string{ReasonExclusiveBusy},
		},
		{
			name:  "hami-core: cores and memory",
			cards: []card{npu("NPU-0", 65536), npu("NPU-1", 65536)},
			node:  []string{ascendproto.AnnotationNodeHAMiCore, "true"},
			held: []*v1.Pod{
				npuPod("h0", "Ascend910B3", []ctr{{n: 1, mem: 60000, cores: 10}}, keys.UseUUID, "NPU-0"),
				npuPod("h1", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: 90}}, keys.UseUUID, "NPU-1"),
			},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 8000, cores: 20}}),
			wantCode: device.Unschedulable,
			want:     []string{ReasonInsufficientCo, ReasonInsufficientMe},
		},
		{
			name:     "hami-core: a card with all cores taken refuses cores 0",
			cards:    []card{npu("NPU-0", 65536)},
			node:     []string{ascendproto.AnnotationNodeHAMiCore, "true"},
			held:     []*v1.Pod{npuPod("h", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: 100}})},
			pod:      npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: 0}}),
			wantCode: device.Unschedulable,
			want:     []string{ReasonCoresFull},
		},
		{
			name:  "a pod without annotation follows a hami-core node",
			cards: []card{npu("NPU-0", 65536)},
			node:  []string{ascendproto.AnnotationNodeHAMiCore, "true"},
			pod:   npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 8738, cores: -1}}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newTestBackend(t, "Ascend910B3", false), ascendNode("n", "Ascend910B3", tc.cards, tc.node...))
			for _, h := range tc.held {
				testkit.Allocate(t, d, h, device.PolicyBinpack)
			}
			st := d.FilterNode(tc.pod, device.PolicyBinpack)
			if tc.want == nil {
				if !st.IsSuccess() {
					t.Fatalf("FilterNode = %s, want success", st.Message())
				}
				return
			}
			if st.IsSuccess() || st.Code != tc.wantCode {
				t.Fatalf("FilterNode = %+v, want code %d", st, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, st.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if _, err := d.Allocate(tc.pod, device.PolicyBinpack); err == nil {
				t.Error("Allocate succeeded where FilterNode failed")
			}
		})
	}
}

func TestPolicyDecidesTheCard(t *testing.T) {
	cards := []card{npu("NPU-0", 65536), npu("NPU-1", 65536)}
	tests := []struct {
		policy, want string
	}{
		{device.PolicyBinpack, "NPU-0,Ascend910B3,16384,0:;"},
		{device.PolicySpread, "NPU-1,Ascend910B3,16384,0:;"},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			d := devicesOf(t, newTestBackend(t, "Ascend910B3", false), ascendNode("n", "Ascend910B3", cards))
			testkit.Allocate(t, d, npuPod("h", "Ascend910B3", []ctr{{n: 1, mem: 1, cores: -1}}), tc.policy)
			r := testkit.Allocate(t, d, npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1, cores: -1}}), tc.policy)
			if got := r.Annotations[ascendproto.KeysFor("Ascend910B3").Allocated]; got != tc.want {
				t.Errorf("allocated %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNetworkGroupsKeepMultiCardRequestsTogether(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	cards := []card{npu("A", 65536).inNetwork(1), npu("B", 65536).inNetwork(2), npu("C", 65536).inNetwork(2),
		npu("D", 65536).inNetwork(1), npu("E", 65536).inNetwork(1)}
	tests := []struct {
		name, policy, want string
	}{
		{"binpack takes the smallest group that holds the request", device.PolicyBinpack,
			"B,Ascend910B3,65536,0:C,Ascend910B3,65536,0:;"},
		{"spread takes the largest", device.PolicySpread, "A,Ascend910B3,65536,0:D,Ascend910B3,65536,0:;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, b, ascendNode("n", "Ascend910B3", cards))
			pod := npuPod("p", "Ascend910B3", []ctr{{n: 2, mem: -1, cores: -1}})
			if s := d.ScoreNode(pod, tc.policy); s < networkWeight {
				t.Errorf("score %v, want at least the network weight %d", s, networkWeight)
			}
			r := testkit.Allocate(t, d, pod, tc.policy)
			if got := r.Annotations[ascendproto.KeysFor("Ascend910B3").Allocated]; got != tc.want {
				t.Errorf("allocated %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateRequest(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	tests := []struct {
		name    string
		pod     *v1.Pod
		wantErr string
	}{
		{"no request", npuPod("p", "Ascend910B3", []ctr{{n: -1, mem: -1, cores: -1}}), ""},
		{"template request", npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 4000, cores: -1}}), ""},
		{"memory without count", npuPod("p", "Ascend910B3", []ctr{{n: -1, mem: 4000, cores: -1}}), "without huawei.com/Ascend910B3"},
		{"fits no template nor the chip", npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 70000, cores: -1}}), "fits no Ascend910B3 template"},
		{"several partial cards", npuPod("p", "Ascend910B3", []ctr{{n: 2, mem: 16384, cores: -1}}), "takes whole cards"},
		{"cores above 100", npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1, cores: 101}}), "want a whole number in [0, 100]"},
		{"unknown mode", npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 1, cores: -1}}, ascendproto.AnnotationVNPUMode, "magic"), "huawei.com/vnpu-mode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := b.ValidateRequest(tc.pod)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("ValidateRequest: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("ValidateRequest = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewDevicesInventory(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	key := ascendproto.KeysFor("Ascend910B3").Register
	tests := []struct {
		name    string
		value   string
		extra   []string
		wantNil bool
		wantErr string
	}{
		{name: "HAMi's JSON with omitted zero fields", value: `[{"id":"a","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true},{"id":"b","devmem":65536}]`},
		{name: "empty list", value: `[]`, wantNil: true},
		{name: "not JSON", value: `a,1,2`, wantErr: "want a JSON list"},
		{name: "no memory", value: `[{"id":"a","count":7}]`, wantErr: "devmem=0"},
		{name: "duplicate", value: `[{"id":"a","devmem":1},{"id":"a","devmem":1}]`, wantErr: "registered twice"},
		{name: "bad NetworkID", value: `[{"id":"a","devmem":1,"custominfo":{"NetworkID":"x"}}]`, wantErr: "NetworkID"},
		{name: "agent deleted", value: `[{"id":"a","devmem":1}]`, extra: []string{ascendproto.KeysFor("Ascend910B3").Handshake, "Deleted_2024"}, wantNil: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := ascendNode("n", "Ascend910B3", nil, tc.extra...)
			n.Annotations[key] = tc.value
			d, err := b.NewDevices(n)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), key) {
					t.Fatalf("err = %v, want one naming %s and %q", err, key, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.wantNil != (d == nil):
				t.Fatalf("devices %v, want nil: %v", d, tc.wantNil)
			}
		})
	}
	if _, err := b.NewDevices(ascendNode("n", "Ascend310P", []card{npu("x", 1)})); err != nil {
		t.Errorf("a node of another chip type: %v", err)
	}
	k1 := b.InventoryKey(ascendNode("n", "Ascend910B3", []card{npu("x", 1)}))
	k2 := b.InventoryKey(ascendNode("n", "Ascend910B3", []card{npu("x", 1)}, ascendproto.AnnotationNodeHAMiCore, "true"))
	if k1 == k2 {
		t.Error("InventoryKey ignores the node's hami-vnpu-core annotation")
	}
}
