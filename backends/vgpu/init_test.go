package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// held is one card's usage: memory MiB, cores and holders.
type held struct{ mem, cores, pods int64 }

// heldOf returns the used cards' usage by UUID.
func heldOf(d *Devices) map[string]held {
	out := map[string]held{}
	for _, u := range testkit.Usage(d) {
		if u.Pods > 0 || u.MemoryUsedMiB > 0 || u.CoresUsed > 0 {
			out[u.ID] = held{u.MemoryUsedMiB, u.CoresUsed, int64(u.Pods)}
		}
	}
	return out
}

func TestInitRequestEntries(t *testing.T) {
	b := newBackend(t)
	tests := []struct {
		name              string
		pod               *v1.Pod
		containers, inits int
		roles             []vgpuproto.Role
		entries           []int // ctr of each requesting container, in order
	}{
		{name: "init containers asking nothing keep the regular layout",
			pod: withInit(one("p", 1, 1000, 0), "is", ctr{-1, -1, -1, -1}, ctr{0, -1, -1, -1}), containers: 1, entries: []int{0}},
		{name: "a sidecar and an app container", pod: withInit(one("p", 1, 1000, 0), "s", ctr{1, 500, -1, 10}),
			containers: 2, inits: 1, roles: []vgpuproto.Role{vgpuproto.RoleSidecar, vgpuproto.RoleApp}, entries: []int{0, 1}},
		{name: "an init container alone asks", pod: withInit(vpod("p", []ctr{{-1, -1, -1, -1}, {-1, -1, -1, -1}}), "ii", ctr{-1, -1, -1, -1}, ctr{2, 100, -1, -1}),
			containers: 4, inits: 2, roles: []vgpuproto.Role{vgpuproto.RoleInit, vgpuproto.RoleInit, vgpuproto.RoleApp, vgpuproto.RoleApp}, entries: []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r request.Pod
			if err := b.parse(tc.pod, "", &r); err != nil {
				t.Fatal(err)
			}
			var entries []int
			for _, c := range r.Ctrs() {
				entries = append(entries, c.Entry)
			}
			if r.Containers != tc.containers || r.Inits != tc.inits {
				t.Errorf("entries %d with %d init entries, want %d with %d", r.Containers, r.Inits, tc.containers, tc.inits)
			}
			if diff := cmp.Diff(tc.roles, r.Roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.entries, entries); diff != "" {
				t.Errorf("requesting entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInitContainerPlacement places pods whose init containers and
// sidecars ask for cards, and checks the cards they get (vgpu-ids-new, init
// containers' entries first) and what the cards are charged: per card, the
// most the pod's containers running together hold (vgpuproto.Peak).
func TestInitContainerPlacement(t *testing.T) {
	twoCards := vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384)})
	oneCard := vgpuNode([]card{gpu("GPU-0", 16384)})
	c := func(n, mem, cores int64) ctr { return ctr{n, mem, -1, cores} }
	tests := []struct {
		name    string
		node    *v1.Node
		others  []*v1.Pod
		pod     *v1.Pod
		wantIDs string
		want    map[string]held
		wantErr []string
	}{
		{name: "init container larger than the app container: the app reuses its card",
			pod:     withInit(one("p", 1, 4000, 30), "i", c(1, 12000, 60)),
			wantIDs: "GPU-0,NVIDIA,12000,60:;GPU-0,NVIDIA,4000,30:", want: map[string]held{"GPU-0": {12000, 60, 1}}},
		{name: "sidecar plus app container add up",
			pod:     withInit(one("p", 1, 4000, 30), "s", c(1, 2000, 20)),
			wantIDs: "GPU-0,NVIDIA,2000,20:;GPU-0,NVIDIA,4000,30:", want: map[string]held{"GPU-0": {6000, 50, 2}}},
		{name: "several init containers: the largest of each resource",
			pod:     withInit(one("p", 1, 1000, 5), "ii", c(1, 3000, 80), c(1, 9000, 10)),
			wantIDs: "GPU-0,NVIDIA,3000,80:;GPU-0,NVIDIA,9000,10:;GPU-0,NVIDIA,1000,5:", want: map[string]held{"GPU-0": {9000, 80, 1}}},
		{name: "sidecar started before a regular init container runs beside it",
			pod:     withInit(one("p", 1, 2000, 20), "si", c(1, 1000, 10), c(1, 6000, 50)),
			wantIDs: "GPU-0,NVIDIA,1000,10:;GPU-0,NVIDIA,6000,50:;GPU-0,NVIDIA,2000,20:", want: map[string]held{"GPU-0": {7000, 60, 2}}},
		{name: "sidecar declared after a regular init container takes its card",
			pod:     withInit(one("p", 1, 2000, 20), "is", c(1, 6000, 50), c(1, 1000, 10)),
			wantIDs: "GPU-0,NVIDIA,6000,50:;GPU-0,NVIDIA,1000,10:;GPU-0,NVIDIA,2000,20:", want: map[string]held{"GPU-0": {6000, 50, 2}}},
		{name: "app container asking more cards: the reused card and a fresh one",
			pod:     withInit(one("p", 2, 2000, 10), "i", c(1, 6000, 50)),
			wantIDs: "GPU-0,NVIDIA,6000,50:;GPU-0,NVIDIA,2000,10:GPU-1,NVIDIA,2000,10:",
			want:    map[string]held{"GPU-0": {6000, 50, 1}, "GPU-1": {2000, 10, 1}}},
		{name: "more than the card if summed, within it at the peak", node: oneCard,
			pod:     withInit(one("p", 1, 8000, 40), "i", c(1, 12000, 60)),
			wantIDs: "GPU-0,NVIDIA,12000,60:;GPU-0,NVIDIA,8000,40:", want: map[string]held{"GPU-0": {12000, 60, 1}}},
		{name: "over a card's memory only at the init peak: the emptier card", node: twoCards,
			others:  []*v1.Pod{placed(one("o", 1, 8000, 0), "GPU-0,NVIDIA,8000,0:")},
			pod:     withInit(one("p", 1, 4000, 0), "i", c(1, 12000, 0)),
			wantIDs: "GPU-1,NVIDIA,12000,0:;GPU-1,NVIDIA,4000,0:",
			want:    map[string]held{"GPU-0": {8000, 0, 1}, "GPU-1": {12000, 0, 1}}},
		{name: "over the only card's memory at the init peak: refused", node: oneCard,
			others:  []*v1.Pod{placed(one("o", 1, 8000, 0), "GPU-0,NVIDIA,8000,0:")},
			pod:     withInit(one("p", 1, 4000, 0), "i", c(1, 12000, 0)),
			wantErr: []string{ReasonInsufficientMem}},
		{name: "the init container's card must hold the container reusing it", node: twoCards,
			others:  []*v1.Pod{placed(one("o", 1, 10000, 0), "GPU-0,NVIDIA,10000,0:")},
			pod:     withInit(one("p", 1, 8000, 0), "i", c(1, 4000, 0)),
			wantIDs: "GPU-1,NVIDIA,4000,0:;GPU-1,NVIDIA,8000,0:",
			want:    map[string]held{"GPU-0": {10000, 0, 1}, "GPU-1": {8000, 0, 1}}},
		{name: "the sidecar's share count counts beside the app", node: vgpuNode([]card{gpu("GPU-0", 16384).withCount(1), gpu("GPU-1", 16384).withCount(1)}),
			pod:     withInit(one("p", 1, 1000, 0), "s", c(1, 1000, 0)),
			wantIDs: "GPU-0,NVIDIA,1000,0:;GPU-1,NVIDIA,1000,0:",
			want:    map[string]held{"GPU-0": {1000, 0, 1}, "GPU-1": {1000, 0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			node := tc.node
			if node == nil {
				node = fourCards()
			}
			d := devicesOf(t, b, node, tc.others...)
			before := heldOf(d)
			if st := d.FilterNode(tc.pod, device.PolicyBinpack); (st == nil) != (tc.wantErr == nil) {
				t.Fatalf("FilterNode = %v, want an error %v", st, tc.wantErr != nil)
			}
			r, err := d.Allocate(tc.pod, device.PolicyBinpack)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Allocate = %v, want an error", r.Annotations)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Allocate error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Annotations[vgpuproto.AnnotationIDs]; got != tc.wantIDs || r.Annotations[vgpuproto.AnnotationToAllocate] != got {
				t.Errorf("vgpu-ids-new = %q, devices-to-allocate %q; want both %q", got, r.Annotations[vgpuproto.AnnotationToAllocate], tc.wantIDs)
			}
			if diff := cmp.Diff(tc.want, heldOf(d), cmp.AllowUnexported(held{})); diff != "" {
				t.Errorf("cards after Allocate (-want +got):\n%s", diff)
			}
			// Read back from the annotation, the pod is charged the same.
			bound := placed(tc.pod, r.Annotations[vgpuproto.AnnotationIDs])
			again := devicesOf(t, b, node, append(tc.others, bound)...)
			if diff := cmp.Diff(tc.want, heldOf(again), cmp.AllowUnexported(held{})); diff != "" {
				t.Errorf("cards accounted from vgpu-ids-new (-want +got):\n%s", diff)
			}
			// Release gives back exactly what Allocate took; so does
			// SubResource what AddResource took.
			if err := d.Release(tc.pod, r); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, heldOf(d), cmp.AllowUnexported(held{})); diff != "" {
				t.Errorf("cards after Release (-before +after):\n%s", diff)
			}
			if a := testkit.Account(t, devicesOf(t, b, node, tc.others...), bound, vgpuproto.AnnotationIDs); a != nil {
				a.CheckRoundTrip(t)
			}
		})
	}
}

// TestInitContainerNodes: the init containers' entries go where the
// node's agent reads them (HAMi's plugin: hami.io/*, init containers first
// with their cards), and nodes whose agent is volcano-vgpu-device-plugin
// (a registration without the numa field) do not take such pods.
func TestInitContainerNodes(t *testing.T) {
	pod := withInit(one("p", 1, 4000, 30), "i", ctr{1, 12000, -1, 60})
	b := newBackend(t)

	hami := devicesOf(t, b, hamiNode())
	r := testkit.Allocate(t, hami, pod, device.PolicyBinpack)
	want := "GPU-h0,NVIDIA,12000,60:;GPU-h0,NVIDIA,4000,30:;"
	if got := r.Annotations[vgpuproto.AnnotationHAMiToAllocate]; got != want || r.Annotations[vgpuproto.AnnotationHAMiAllocated] != want {
		t.Errorf("hami.io/vgpu-devices-to-allocate = %q, want %q", got, want)
	}
	if diff := cmp.Diff(map[string]held{"GPU-h0": {12000, 60, 1}}, heldOf(hami), cmp.AllowUnexported(held{})); diff != "" {
		t.Errorf("HAMi node's card (-want +got):\n%s", diff)
	}

	upstream := vgpuNode(nil, vgpuproto.AnnotationRegister, "GPU-u,10,16384,NVIDIA-T4,true,hami-core:")
	d := devicesOf(t, b, upstream)
	st := d.FilterNode(pod, device.PolicyBinpack)
	if st == nil || st.Code != device.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), ReasonInitAgent) {
		t.Errorf("FilterNode on volcano-vgpu-device-plugin's node = %v, want unresolvable %q", st, ReasonInitAgent)
	}
	if st := d.FilterNode(one("q", 1, 4000, 30), device.PolicyBinpack); st != nil {
		t.Errorf("a pod without init requests on that node: %v", st)
	}
}
