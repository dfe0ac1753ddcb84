package vgpu

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestAllocateAnnotations(t *testing.T) {
	d := devicesOf(t, newBackend(t), fourCards())
	r, err := d.Allocate(vpod("p", []ctr{{2, 3000, -1, 30}, {-1, -1, -1, -1}, {1, -1, 25, 0}}), device.PolicySpread)
	if err != nil {
		t.Fatal(err)
	}
	ids := "GPU-0,NVIDIA,3000,30:GPU-1,NVIDIA,3000,30:;;GPU-2,NVIDIA,4096,0:"
	now := strconv.Itoa(testUnix)
	want := map[string]string{
		vgpuproto.AnnotationIDs: ids, vgpuproto.AnnotationToAllocate: ids, vgpuproto.AnnotationNode: "node-a",
		vgpuproto.AnnotationTime: now, vgpuproto.AnnotationBindPhase: "allocating", vgpuproto.AnnotationBindTime: now,
	}
	if diff := cmp.Diff(want, r.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"volcano.sh/vgpu-number": 3, "volcano.sh/vgpu-memory": 10096, "volcano.sh/vgpu-cores": 60},
		d.AddQueueResource(vpod("p", nil))); diff != "" {
		t.Errorf("AddQueueResource (-want +got):\n%s", diff)
	}
}

func TestAllocateRefusals(t *testing.T) {
	held := placed(one("held", 1, 1000, 0), "GPU-0,NVIDIA,1000,0:")
	tests := []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{name: "already accounted", pod: one("held", 1, 1, 0), want: "already holds"},
		{name: "does not fit", pod: one("p", 1, 20000, 0), want: ReasonCardTooSmall},
		{name: "too many cards", pod: one("p", 5, 1, 0), want: ReasonTooFewCards},
		{name: "invalid", pod: one("p", 1, 1, 0, vgpuproto.AnnotationMode, "?"), want: vgpuproto.AnnotationMode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), fourCards(), held)
			before := d.GetStatus()
			if r, err := d.Allocate(tc.pod, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Allocate = %v, %v; want an error containing %q", r, err, tc.want)
			}
			if got := d.GetStatus(); got != before {
				t.Errorf("a refused Allocate changed the state:\n%s\n%s", before, got)
			}
		})
	}
}

func TestReleaseRejectsMismatch(t *testing.T) {
	d := devicesOf(t, newBackend(t), fourCards(), placed(one("held", 1, 1000, 0), "GPU-0,NVIDIA,1000,0:"))
	before := d.GetStatus()
	for _, tc := range []struct {
		pod   *v1.Pod
		value string
		want  string
	}{
		{one("held", 1, 1000, 0), "GPU-1,NVIDIA,1000,0:", `the pod holds "GPU-0,NVIDIA,1000,0:"`},
		{one("other", 1, 1000, 0), "GPU-0,NVIDIA,1000,0:", "holds no cards"},
	} {
		err := d.Release(tc.pod, &device.Reservation{Annotations: map[string]string{vgpuproto.AnnotationIDs: tc.value}})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), vgpuproto.AnnotationIDs) {
			t.Errorf("Release(%s, %q) = %v, want an error naming %s and containing %q", tc.pod.Name, tc.value, err, vgpuproto.AnnotationIDs, tc.want)
		}
	}
	if err := d.Release(one("x", 1, 1, 0), nil); err != nil {
		t.Errorf("Release(nil) = %v", err)
	}
	if got := d.GetStatus(); got != before {
		t.Errorf("refused releases changed the state:\n%s\n%s", before, got)
	}
}

func TestAccountingIgnoresAndRefuses(t *testing.T) {
	d := devicesOf(t, newBackend(t), fourCards(), placed(one("a", 1, 1000, 10), "GPU-0,NVIDIA,1000,10:"))
	before := d.GetStatus()
	done := placed(one("done", 1, 1000, 0), "GPU-1,NVIDIA,1000,0:")
	done.Status.Phase = v1.PodSucceeded
	for _, p := range []*v1.Pod{done, one("unplaced", 1, 1, 0), placed(one("a", 1, 1000, 10), "GPU-0,NVIDIA,1000,10:")} {
		if err := d.AddResource(p); err != nil {
			t.Errorf("AddResource(%s) = %v, want nil", p.Name, err)
		}
	}
	if err := d.AddResource(placed(one("a", 1, 1000, 10), "GPU-1,NVIDIA,1000,10:")); err == nil ||
		!strings.Contains(err.Error(), "already accounted") {
		t.Errorf("AddResource of a changed record = %v, want already accounted", err)
	}
	if err := d.SubResource(one("never", 1, 1, 0)); err != nil {
		t.Errorf("SubResource of an unknown pod = %v", err)
	}
	if got := d.GetStatus(); got != before {
		t.Errorf("state changed:\n%s\n%s", before, got)
	}
}

// TestPropertyNoOvercommitAndExactRelease allocates random request
// sequences on random mixed nodes under every policy, releasing some pods
// along the way; memory, cores and share counts never exceed any card's
// capacity, accounting the annotations on a fresh node gives the same
// state, and releasing everything restores the empty node exactly.
func TestPropertyNoOvercommitAndExactRelease(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	policies := []string{device.PolicyBinpack, device.PolicySpread}
	for round := 0; round < 60; round++ {
		b := newBackend(t)
		node := randomNode(rng)
		d := devicesOf(t, b, node)
		empty := d.GetStatus()
		type placement struct {
			pod *v1.Pod
			r   *device.Reservation
		}
		var live []placement
		for step := 0; step < 40; step++ {
			if len(live) > 0 && rng.IntN(4) == 0 {
				i := rng.IntN(len(live))
				if err := d.Release(live[i].pod, live[i].r); err != nil {
					t.Fatalf("round %d: Release: %v", round, err)
				}
				live = append(live[:i], live[i+1:]...)
				continue
			}
			p := randomPod(rng)
			p.Name, p.UID = "p"+strconv.Itoa(step), types.UID("uid-p"+strconv.Itoa(step))
			if rng.IntN(3) == 0 {
				p.Annotations[vgpuproto.AnnotationGPUPolicy] = PolicyTopologyAware
			}
			policy := policies[rng.IntN(2)]
			fits := d.FilterNode(p, policy).IsSuccess()
			r, err := d.Allocate(p, policy)
			if fits != (err == nil) {
				t.Fatalf("round %d: FilterNode fits=%v but Allocate err=%v", round, fits, err)
			}
			if err == nil {
				live = append(live, placement{p, r})
			}
			checkCapacity(t, d)
		}
		fresh := devicesOf(t, b, node)
		for _, l := range live {
			if err := fresh.AddResource(device.ApplyReservation(l.pod, l.r)); err != nil {
				t.Fatalf("round %d: AddResource: %v", round, err)
			}
		}
		if got, want := fresh.GetStatus(), d.GetStatus(); got != want {
			t.Fatalf("round %d: re-accounted state differs:\n%s\n%s", round, want, got)
		}
		for _, l := range live {
			if err := d.Release(l.pod, l.r); err != nil {
				t.Fatal(err)
			}
		}
		if got := d.GetStatus(); got != empty {
			t.Fatalf("round %d: after releasing everything:\n%s\nwant\n%s", round, got, empty)
		}
	}
}

func randomNode(rng *rand.Rand) *v1.Node {
	sizes := []int64{16384, 24576, 40960, 81920}
	var cards []card
	for i := 0; i < 1+rng.IntN(8); i++ {
		c := gpu("GPU-"+strconv.Itoa(i), sizes[rng.IntN(len(sizes))]).withCount(1 + rng.IntN(10))
		switch rng.IntN(8) {
		case 0:
			c = c.unhealthy()
		case 1:
			c = c.withType("NVIDIA-A100-SXM4-40GB").inMode(vgpuproto.ModeMIG)
			c.mem = 40960
		}
		cards = append(cards, c)
	}
	if rng.IntN(2) == 0 {
		return vgpuNode(cards)
	}
	return vgpuNode(cards, vgpuproto.AnnotationHAMiScore, topologyScores)
}

func checkCapacity(t *testing.T, d *Devices) {
	t.Helper()
	cards, _ := d.CardUsage()
	for _, c := range cards {
		if c.MemoryUsedMiB > c.MemoryTotalMiB || c.CoresUsed > c.CoresTotal || c.Pods > c.MaxPods ||
			c.MemoryUsedMiB < 0 || c.CoresUsed < 0 || c.Pods < 0 || (!c.Healthy && c.Pods > 0) {
			t.Fatalf("card %s over capacity or unhealthy in use: %+v", c.ID, c)
		}
	}
}

func TestStatusAdvertisedAndIgnored(t *testing.T) {
	d := devicesOf(t, newBackend(t), vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 81920)}),
		placed(one("a", 1, 1000, 30, AnnotationGroupName, "pg"), "GPU-1,NVIDIA,1000,30:"))
	want := "0 GPU-0 NVIDIA-Tesla V100-PCIE-32GB hami-core numa 0: 0/16384 MiB, cores 0/100, pods 0/10; " +
		"1 GPU-1 NVIDIA-Tesla V100-PCIE-32GB hami-core numa 0: 1000/81920 MiB, cores 30/100, pods 1/10, gangs [ns/pgx1]"
	if got := d.GetStatus(); got != want {
		t.Errorf("GetStatus:\n got %q\nwant %q", got, want)
	}
	adv := d.Advertised()
	for res, want := range map[v1.ResourceName]int64{"volcano.sh/vgpu-memory": 98304, "volcano.sh/vgpu-memory-percentage": 200,
		"volcano.sh/vgpu-cores": 200, "volcano.sh/vgpu-priority": 20} {
		if q := adv[res]; q.Value() != want {
			t.Errorf("Advertised()[%s] = %v, want %d", res, q.String(), want)
		}
	}
	if diff := cmp.Diff([]string{"volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory-percentage", "volcano.sh/vgpu-cores",
		"volcano.sh/vgpu-priority"}, d.GetIgnoredDevices()); diff != "" {
		t.Errorf("GetIgnoredDevices (-want +got):\n%s", diff)
	}
	if _, pods := d.CardUsage(); pods != 1 {
		t.Errorf("CardUsage pods = %d, want 1", pods)
	}
}
