package mindcluster

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// TestAllocateTemplates checks the annotation each request gets: the
// template for its cores and labels, a downgrade only when no chip takes the
// template, and whole chips for multiples of 8 cores.
func TestAllocateTemplates(t *testing.T) {
	b := newBackend(t, Options{})
	two := node310P("n", 2, chips(0, 1))
	tests := []struct {
		name   string
		node   *v1.Node
		held   []*v1.Pod
		pod    *v1.Pod
		policy string
		want   string
	}{
		{name: "1 core", node: two, pod: corePod("p", 1), want: "0-vir01"},
		{name: "2 cores low by default", node: two, pod: corePod("p", 2), want: "0-vir02_1c"},
		{name: "2 cores high", node: two, pod: corePod("p", 2, mindclusterproto.LabelVNPULevel, "high"), want: "0-vir02"},
		{name: "4 cores low", node: two, pod: corePod("p", 4, mindclusterproto.LabelVNPULevel, "low"), want: "0-vir04_3c"},
		{name: "4 cores high", node: two, pod: corePod("p", 4, mindclusterproto.LabelVNPULevel, "high"), want: "0-vir04"},
		{name: "4 cores with DVPP", node: two, pod: corePod("p", 4, mindclusterproto.LabelVNPUDVPP, "yes"), want: "0-vir04_4c_dvpp"},
		{name: "4 cores without DVPP", node: two, pod: corePod("p", 4, mindclusterproto.LabelVNPUDVPP, "no", mindclusterproto.LabelVNPULevel, "high"),
			want: "0-vir04_3c_ndvpp"},
		{name: "4 cores dvpp null is shared DVPP", node: two, pod: corePod("p", 4, mindclusterproto.LabelVNPUDVPP, "null"), want: "0-vir04_3c"},
		{name: "one whole chip", node: two, pod: corePod("p", 8), want: "0"},
		{name: "two whole chips", node: two, pod: corePod("p", 16), want: "0,1"},
		{name: "whole chips skip held and sliced chips", node: node310P("n", 4, chips(0, 1, 2, 3)),
			held: []*v1.Pod{placed(corePod("h1", 8), "0", false), placed(corePod("h2", 1), "2-vir01", true)},
			pod:  corePod("p", 16), want: "1,3"},
		{name: "binpack picks the fullest chip", node: two,
			held: []*v1.Pod{placed(corePod("h", 2), "1-vir02_1c", true)}, pod: corePod("p", 1), want: "1-vir01"},
		{name: "spread picks the emptiest chip", node: two, policy: device.PolicySpread,
			held: []*v1.Pod{placed(corePod("h", 2), "0-vir02_1c", true)}, pod: corePod("p", 1), want: "1-vir01"},
		{name: "a high vir02 downgrades when the chip lacks an AI CPU", node: node310P("n", 1, chips(0)),
			held: []*v1.Pod{placed(corePod("h1", 4, mindclusterproto.LabelVNPULevel, "high"), "0-vir04", true),
				placed(corePod("h2", 2, mindclusterproto.LabelVNPULevel, "high"), "0-vir02", true)},
			pod: corePod("p", 2, mindclusterproto.LabelVNPULevel, "high"), want: "0-vir02_1c"},
		{name: "a high vir04 downgrades to vir04_3c", node: node310P("n", 1, chips(0)),
			held: []*v1.Pod{placed(corePod("h1", 4, mindclusterproto.LabelVNPULevel, "high"), "0-vir04", true)},
			pod:  corePod("p", 4, mindclusterproto.LabelVNPULevel, "high"), want: "0-vir04_3c"},
		{name: "no downgrade while another chip takes the template", node: two,
			held: []*v1.Pod{placed(corePod("h1", 4, mindclusterproto.LabelVNPULevel, "high"), "0-vir04", true),
				placed(corePod("h2", 2, mindclusterproto.LabelVNPULevel, "high"), "0-vir02", true)},
			pod: corePod("p", 2, mindclusterproto.LabelVNPULevel, "high"), want: "1-vir02"},
		{name: "a dvpp vNPU pairs with an ndvpp one", node: node310P("n", 1, chips(0)),
			held: []*v1.Pod{placed(corePod("h", 4, mindclusterproto.LabelVNPUDVPP, "yes"), "0-vir04_4c_dvpp", true)},
			pod:  corePod("p", 4, mindclusterproto.LabelVNPUDVPP, "no"), want: "0-vir04_3c_ndvpp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			policy := tc.policy
			if policy == "" {
				policy = device.PolicyBinpack
			}
			d := newDevicesFor(t, b, tc.node, tc.held...)
			if st := d.FilterNode(tc.pod, policy); !st.IsSuccess() {
				t.Fatalf("FilterNode: %v", st.Reasons)
			}
			r, err := d.Allocate(tc.pod, policy)
			if err != nil {
				t.Fatalf("Allocate: %v", err)
			}
			want := map[string]string{mindclusterproto.AnnotationNPUCore: tc.want, mindclusterproto.AnnotationPredicateTime: "1700000000000000123",
				mindclusterproto.AnnotationVolcanoPredicateTime: "1700000000000000123"}
			if diff := cmp.Diff(want, r.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterReasons checks every failure reason and whether evictions
// could resolve it.
func TestFilterReasons(t *testing.T) {
	one := node310P("n", 1, chips(0))
	high4 := corePod("h", 4, mindclusterproto.LabelVNPULevel, "high")
	tests := []struct {
		name       string
		node       *v1.Node
		concurrent bool
		held       []*v1.Pod
		pod        *v1.Pod
		wantCode   int
		want       []string
	}{
		{name: "unhealthy chip", node: node310P("n", 1, chips(0), mindclusterproto.AnnotationUnhealthyChips, chips(0)), pod: corePod("p", 1),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonChipUnhealthy}},
		{name: "chip held whole", node: one, held: []*v1.Pod{placed(corePod("h", 8), "0", false)}, pod: corePod("p", 1),
			wantCode: device.Unschedulable, want: []string{ReasonChipHeldWhole}},
		{name: "whole chip asked of a sliced chip", node: one, held: []*v1.Pod{placed(corePod("h", 1), "0-vir01", true)},
			pod: corePod("p", 8), wantCode: device.Unschedulable, want: []string{ReasonChipSliced}},
		{name: "AI cores", node: one, held: []*v1.Pod{placed(high4, "0-vir04", true), placed(corePod("h2", 4), "0-vir04_3c", true)},
			pod: corePod("p", 1), wantCode: device.Unschedulable, want: []string{ReasonChipAICore}},
		{name: "AI CPUs: the dvpp template has no downgrade", node: one, held: []*v1.Pod{placed(high4, "0-vir04", true)},
			pod: corePod("p", 4, mindclusterproto.LabelVNPUDVPP, "yes"), wantCode: device.Unschedulable, want: []string{ReasonChipAICPU}},
		{name: "DVPP", node: one, held: []*v1.Pod{placed(corePod("h", 4, mindclusterproto.LabelVNPUDVPP, "yes"), "0-vir04_4c_dvpp", true)},
			pod: corePod("p", 2), wantCode: device.Unschedulable, want: []string{ReasonChipDVPP}},
		{name: "no chip offered", node: node310P("n", 2, ""), pod: corePod("p", 1),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonNoFreeChips}},
		{name: "no chip offered for whole chips", node: node310P("n", 2, ""), pod: corePod("p", 8),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonNoFreeChips}},
		{name: "more chips than the node has", node: node310P("n", 2, chips(0, 1)), pod: corePod("p", 24),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonTooFewChips}},
		{name: "more chips than the node offers healthy", node: node310P("n", 3, chips(0, 1, 2), mindclusterproto.AnnotationUnhealthyChips, chips(2)),
			held: []*v1.Pod{placed(corePod("h", 8), "0", false)}, pod: corePod("p", 24),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonChipHeldWhole, ReasonChipUnhealthy, ReasonTooFewChips}},
		{name: "not enough idle chips", node: node310P("n", 2, chips(0, 1)), held: []*v1.Pod{placed(corePod("h", 8), "1", false)},
			pod: corePod("p", 16), wantCode: device.Unschedulable, want: []string{ReasonChipHeldWhole}},
		{name: "cores not a whole number of this node's chips", node: func() *v1.Node {
			n := node310P("n", 2, chips(0, 1))
			n.Labels[mindclusterproto.LabelServerType] = "Ascend310P-10-dual"
			n.Status.Capacity[mindclusterproto.ResourceNPUCore] = resourceOf(20)
			return n
		}(), pod: corePod("p", 8), wantCode: device.UnschedulableAndUnresolvable, want: []string{ReasonNotWholeChips}},
		{name: "vNPUs in three groups refuse 4 cores", node: one, held: inGroups(0, 1, 2),
			pod: corePod("p", 4), wantCode: device.Unschedulable, want: []string{ReasonChipVGroups}},
		{name: "vNPUs in four groups refuse 2 cores", node: one, held: inGroups(0, 1, 2, 3),
			pod: corePod("p", 2), wantCode: device.Unschedulable, want: []string{ReasonChipVGroups}},
		{name: "a vNPU in flight", node: node310P("n", 2, chips(0, 1)), held: []*v1.Pod{placed(corePod("h", 1), "0-vir01", false)},
			pod: corePod("p", 1), wantCode: device.Unschedulable, want: []string{ReasonInFlight}},
		{name: "invalid request", node: one, pod: corePod("p", 1, mindclusterproto.LabelVNPULevel, "x"),
			wantCode: device.UnschedulableAndUnresolvable, want: []string{`invalid mindcluster310p request: pod labels: vnpu-level="x": want low or high`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevicesFor(t, newBackend(t, Options{ConcurrentVNPUs: tc.concurrent}), tc.node, tc.held...)
			st := d.FilterNode(tc.pod, device.PolicyBinpack)
			if st.IsSuccess() {
				t.Fatalf("FilterNode accepted the pod on %s", d.GetStatus())
			}
			if st.Code != tc.wantCode {
				t.Errorf("code = %d, want %d", st.Code, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, st.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			if _, err := d.Allocate(tc.pod, device.PolicyBinpack); err == nil {
				t.Error("Allocate succeeded where FilterNode refused")
			}
		})
	}
}

// inGroups returns confirmed vir01 pods on chip 0, one per vNPU group.
func inGroups(groups ...int) []*v1.Pod {
	var out []*v1.Pod
	for _, g := range groups {
		p := placed(corePod("g"+strconv.Itoa(g), 1), "0-vir01", true)
		p.Annotations[mindclusterproto.AnnotationAscendReal] = "Ascend310P-1c.1cpu-" + strconv.Itoa(100+g) + "-0_" + strconv.Itoa(g)
		out = append(out, p)
	}
	return out
}

func TestVGroups(t *testing.T) {
	b := newBackend(t, Options{})
	one := node310P("n", 1, chips(0))
	// Two groups: a 4-core vNPU still fits next to the two vir01.
	if got := allocated(t, newDevicesFor(t, b, one, inGroups(0, 1)...), corePod("p", 4), device.PolicyBinpack); got != "0-vir04_3c" {
		t.Errorf("two groups: %s, want 0-vir04_3c", got)
	}
	// Three groups take a 2-core vNPU, four only a 1-core one.
	if got := allocated(t, newDevicesFor(t, b, one, inGroups(0, 1, 2)...), corePod("p", 2), device.PolicyBinpack); got != "0-vir02_1c" {
		t.Errorf("three groups: %s, want 0-vir02_1c", got)
	}
	if got := allocated(t, newDevicesFor(t, b, one, inGroups(0, 1, 2, 3)...), corePod("p", 1), device.PolicyBinpack); got != "0-vir01" {
		t.Errorf("four groups: %s, want 0-vir01", got)
	}
	// Releasing the pods frees their groups.
	held := inGroups(0, 1, 2)
	d := newDevicesFor(t, b, one, held...)
	if err := d.SubResource(held[2]); err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, d, corePod("p", 4), device.PolicyBinpack); got != "0-vir04_3c" {
		t.Errorf("after a group emptied: %s, want 0-vir04_3c", got)
	}
	for in, want := range map[string]int{"Ascend310P-2c.1cpu-105-0_3": 3, "": -1, "Ascend310P-0": -1, "x_y": -1, "a_9": -1} {
		if got := vgroupOf(in); got != want {
			t.Errorf("vgroupOf(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestInFlightRule checks that a vNPU the device plugin has not created yet
// keeps further vNPUs, but not whole chips, off the node until its pod shows
// huawei.com/AscendReal, and that ConcurrentVNPUs lifts the rule.
func TestInFlightRule(t *testing.T) {
	n := node310P("n", 2, chips(0, 1))
	d := newDevicesFor(t, newBackend(t, Options{}), n)
	first := corePod("first", 1)
	if got := allocated(t, d, first, device.PolicyBinpack); got != "0-vir01" {
		t.Fatalf("first = %s", got)
	}
	if st := d.FilterNode(corePod("second", 2), device.PolicyBinpack); st.IsSuccess() || st.Reasons[0] != ReasonInFlight {
		t.Errorf("a second vNPU while the first is in flight: %+v", st)
	}
	if got := allocated(t, d, corePod("whole", 8), device.PolicyBinpack); got != "1" {
		t.Errorf("a whole chip while a vNPU is in flight = %s, want 1", got)
	}

	// The ledger accounts the pod again when the device plugin confirms it.
	annotated := placed(first, "0-vir01", false)
	if err := d.SubResource(annotated); err != nil {
		t.Fatal(err)
	}
	if err := d.AddResource(placed(first, "0-vir01", true)); err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, d, corePod("second", 2), device.PolicyBinpack); got != "0-vir02_1c" {
		t.Errorf("second after the first was confirmed = %s, want 0-vir02_1c", got)
	}

	c := newDevicesFor(t, newBackend(t, Options{ConcurrentVNPUs: true}), n, placed(first, "0-vir01", false))
	if got := allocated(t, c, corePod("second", 2), device.PolicyBinpack); got != "0-vir02_1c" {
		t.Errorf("second with ConcurrentVNPUs = %s, want 0-vir02_1c", got)
	}
}

// TestUnlistedChips checks that a chip the device plugin no longer offers
// is known while pods hold vNPUs on it, takes more vNPUs, and is forgotten
// when they leave.
func TestUnlistedChips(t *testing.T) {
	b := newBackend(t, Options{})
	holder := placed(corePod("h", 2), "3-vir02_1c", true)
	d := newDevicesFor(t, b, node310P("n", 4, chips(0)), holder)
	if got := allocated(t, d, corePod("p", 1), device.PolicyBinpack); got != "3-vir01" {
		t.Errorf("binpack onto the held unlisted chip = %s, want 3-vir01", got)
	}
	if err := d.Release(corePod("p", 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := d.SubResource(holder); err != nil {
		t.Fatal(err)
	}
	if got, want := d.GetStatus(), "Ascend310P-0: cores 0/8, cpus 0/7, [], whole 0; in flight 0"; got != want {
		t.Errorf("status after the holder left = %q, want %q", got, want)
	}
	// A pod naming more chips than the node has is refused.
	full := newDevicesFor(t, b, node310P("n", 1, chips(0)))
	if err := full.AddResource(placed(corePod("x", 1), "1-vir01", true)); err == nil {
		t.Error("AddResource accepted a chip beyond the node's capacity")
	}
}

func TestAddResourceChecksTheRequest(t *testing.T) {
	d := newDevicesFor(t, newBackend(t, Options{}), node310P("n", 2, chips(0, 1)))
	for _, p := range []*v1.Pod{
		placed(corePod("a", 2), "0-vir01", true), // template of 1 core for 2
		placed(corePod("b", 16), "0", true),      // one chip for two
		placed(corePod("c", 1, mindclusterproto.LabelRingController, "ascend-910"), "0-vir01", true),
	} {
		if err := d.AddResource(p); err == nil {
			t.Errorf("%s: AddResource accepted %s", p.Name, p.Annotations[mindclusterproto.AnnotationNPUCore])
		}
	}
	if got, want := d.GetStatus(), newDevicesFor(t, newBackend(t, Options{}), node310P("n", 2, chips(0, 1))).GetStatus(); got != want {
		t.Errorf("state changed: %q, want %q", got, want)
	}
}

func TestCardUsage(t *testing.T) {
	d := newDevicesFor(t, newBackend(t, Options{}), node310P("n", 3, chips(0, 1, 2), mindclusterproto.AnnotationUnhealthyChips, chips(2)),
		placed(corePod("a", 2), "0-vir02_1c", true), placed(corePod("b", 8), "1", false))
	got, pods := d.CardUsage()
	want := []device.CardUsage{
		{ID: "Ascend310P-0", Index: 0, Type: "310P3", Healthy: true, MemoryUsedMiB: 6144, MemoryTotalMiB: 24576,
			CoresUsed: 2, CoresTotal: 8, Pods: 1, MaxPods: 7},
		{ID: "Ascend310P-1", Index: 1, Type: "310P3", Healthy: true, MemoryUsedMiB: 24576, MemoryTotalMiB: 24576,
			CoresUsed: 8, CoresTotal: 8, Pods: 1, MaxPods: 7},
		{ID: "Ascend310P-2", Index: 2, Type: "310P3", MemoryTotalMiB: 24576, CoresTotal: 8, MaxPods: 7},
	}
	if diff := cmp.Diff(want, got); diff != "" || pods != 2 {
		t.Errorf("CardUsage pods = %d, (-want +got):\n%s", pods, diff)
	}
	if q := d.AddQueueResource(placed(corePod("b", 8), "1", false)); q[string(mindclusterproto.ResourceNPUCore)] != 8 {
		t.Errorf("AddQueueResource = %v, want 8 AI cores", q)
	}
}
