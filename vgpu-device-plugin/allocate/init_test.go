package allocate_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// warm is a pod whose init container "warm" (12000 MiB, 60 %), sidecar
// "proxy" (2000 MiB, 20 %) and container "main" (4000 MiB, 30 %) ask for
// one card each, allocated ids (the init containers' entries first).
func warm(ids string) *podBuilder {
	return newPod("warm").
		initContainer("warm", false, 1, map[string]int64{"volcano.sh/vgpu-memory": 12000, "volcano.sh/vgpu-cores": 60}).
		initContainer("proxy", true, 1, map[string]int64{"volcano.sh/vgpu-memory": 2000, "volcano.sh/vgpu-cores": 20}).
		container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 4000, "volcano.sh/vgpu-cores": 30}).
		allocated(ids, 1)
}

// The kubelet admits the init container, the sidecar, then the app
// container, one Allocate each: each gets its own card, limits and shared
// region, in that order, whatever device IDs the kubelet reuses.
func TestAllocateInitContainersAndSidecars(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	ids := entry(u[0], 12000, 60) + ";" + entry(u[0], 2000, 20) + ";" + entry(u[1], 4000, 30)
	e.add(t, warm(ids).build())
	for i, want := range []struct {
		ctr, card, mem, sm string
	}{
		{"warm", u[0], "12000m", "60"},
		{"proxy", u[0], "2000m", "20"},
		{"main", u[1], "4000m", "30"},
	} {
		resp, err := e.alloc.Allocate(context.Background(), request(1))
		if err != nil {
			t.Fatalf("Allocate %d (%s): %v", i, want.ctr, err)
		}
		got := resp.ContainerResponses[0]
		for k, v := range map[string]string{"NVIDIA_VISIBLE_DEVICES": want.card, "CUDA_DEVICE_MEMORY_LIMIT_0": want.mem, "CUDA_DEVICE_SM_LIMIT": want.sm} {
			if got.Envs[k] != v {
				t.Errorf("%s: %s=%q, want %q (all: %v)", want.ctr, k, got.Envs[k], v, got.Envs)
			}
		}
		dir := filepath.Join(e.cache, "containers", "uid-warm_"+want.ctr)
		if !hasMount(got, dir) {
			t.Errorf("%s: mounts %v, want its own cache directory %s", want.ctr, got.Mounts, dir)
		}
	}
	wantCalls := []patch{
		{Pod: "warm", Annotations: map[string]string{vgpuproto.AnnotationToAllocate: ";" + entry(u[0], 2000, 20) + ";" + entry(u[1], 4000, 30)}},
		{Pod: "warm", Annotations: map[string]string{vgpuproto.AnnotationToAllocate: ";;" + entry(u[1], 4000, 30)}},
		{Pod: "warm", Annotations: map[string]string{vgpuproto.AnnotationToAllocate: ";;", vgpuproto.AnnotationBindPhase: "success"}},
		{Pod: "warm"}, // node lock released
	}
	if diff := cmp.Diff(wantCalls, e.rec.Calls()); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
}

func hasMount(r *pluginapi.ContainerAllocateResponse, hostPath string) bool {
	for _, m := range r.GetMounts() {
		if m.HostPath == hostPath {
			return true
		}
	}
	return false
}

// The agent checks a card against what every pod holds of it at its peak,
// as the scheduler charges it: the init container (30000 MiB) and the app
// container (20000 MiB) never run together, so a 40960 MiB card takes
// them; beside a pod holding 15000 MiB it does not.
func TestAllocateChecksCardsAtThePeak(t *testing.T) {
	for _, tc := range []struct {
		name    string
		others  int
		wantErr string
	}{
		{name: "more than the card if summed, within it at the peak"},
		{name: "over the card at the peak", others: 15000, wantErr: "would have 45000 of 40960 memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			u := e.uuids
			pod := newPod("p").initContainer("init", false, 1, nil).container("main", 1, nil).
				allocated(entry(u[0], 30000, 0)+";"+entry(u[0], 20000, 0), 2).build()
			e.add(t, pod)
			if tc.others > 0 {
				e.add(t, newPod("other").container("c", 1, nil).allocated(entry(u[0], tc.others, 0), 1).
					annotate(vgpuproto.AnnotationBindPhase, vgpuproto.BindPhaseSuccess).phase(v1.PodRunning).build())
			}
			_, err := e.alloc.Allocate(context.Background(), request(1))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, codes.PermissionDenied)
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
		})
	}
}

// The kubelet's requests name devices, not containers: a pod whose entries
// would not follow its Allocate calls one for one is refused rather than
// served another container's cards.
func TestAllocateRefusesEntriesTheKubeletWouldNotFollow(t *testing.T) {
	tests := []struct {
		name string
		pod  func(u []string) *podBuilder
		want string
	}{
		{name: "an init container asks, the allocation has no init entries",
			pod: func(u []string) *podBuilder {
				return newPod("p").initContainer("warm", false, 1, nil).container("main", 1, nil).allocated(entry(u[0], 1000, 0), 1)
			},
			want: `init container "warm" asks for 1 of volcano.sh/vgpu-number, but volcano.sh/vgpu-ids-new has no entries for init containers`},
		{name: "an init container asks, its entry is empty",
			pod: func(u []string) *podBuilder {
				return newPod("p").initContainer("warm", false, 1, nil).container("main", 1, nil).allocated(";"+entry(u[0], 1000, 0), 1)
			},
			want: `init container "warm" asks for 1 of volcano.sh/vgpu-number, its entry 0 of volcano.sh/vgpu-ids-new has 0 cards`},
		{name: "an entry for a container asking for no card",
			pod: func(u []string) *podBuilder {
				return newPod("p").initContainer("warm", false, 0, nil).container("main", 1, nil).allocated(entry(u[0], 1000, 0)+";"+entry(u[1], 1000, 0), 1)
			},
			want: `init container "warm" asks for 0 of volcano.sh/vgpu-number, its entry 0`},
		{name: "a sidecar asks for two, its entry has one",
			pod: func(u []string) *podBuilder {
				return newPod("p").initContainer("proxy", true, 2, nil).container("main", 1, nil).allocated(entry(u[0], 1000, 0)+";"+entry(u[1], 1000, 0), 1)
			},
			want: `init container "proxy" asks for 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.add(t, tc.pod(e.uuids).build())
			_, err := e.alloc.Allocate(context.Background(), request(1))
			wantCode(t, err, codes.PermissionDenied)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
