package allocate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

func request(n ...int) *pluginapi.AllocateRequest {
	req := &pluginapi.AllocateRequest{}
	for _, k := range n {
		ids := make([]string, k)
		for i := range ids {
			ids[i] = fmt.Sprintf("virtual-%d", i)
		}
		req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIDs: ids})
	}
	return req
}

func entry(uuid string, mem, cores int) string {
	return fmt.Sprintf("%s,NVIDIA,%d,%d:", uuid, mem, cores)
}

func TestAllocateTwoContainersEndToEnd(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	// Our scheduler's format: one entry per container, the sidecar's empty.
	ids := entry(u[7], 4000, 30) + entry(u[6], 4000, 30) + ";;" + entry(u[5], 2000, 0)
	pod := newPod("train").
		container("main", 2, map[string]int64{"volcano.sh/vgpu-memory": 4000, "volcano.sh/vgpu-cores": 30, "volcano.sh/vgpu-priority": 1}).
		container("sidecar", 0, nil).
		container("eval", 1, map[string]int64{"volcano.sh/vgpu-memory": 2000}).env("CUDA_DISABLE_CONTROL", "true").
		allocated(ids, 100).build()
	e.add(t, pod)

	resp, err := e.alloc.Allocate(context.Background(), request(2))
	if err != nil {
		t.Fatalf("Allocate main: %v", err)
	}
	dir := filepath.Join(e.cache, "containers", "uid-train_main")
	want := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{
			"NVIDIA_VISIBLE_DEVICES":          u[7] + "," + u[6],
			"CUDA_DEVICE_MEMORY_LIMIT_0":      "4000m",
			"CUDA_DEVICE_MEMORY_LIMIT_1":      "4000m",
			"CUDA_DEVICE_SM_LIMIT":            "30",
			"CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/vgpu/region-1.cache",
			"CUDA_TASK_PRIORITY":              "1",
		},
		Mounts: []*pluginapi.Mount{
			{ContainerPath: "/usr/local/vgpu/libvgpu.so", HostPath: "/usr/local/vgpu/libvgpu.so", ReadOnly: true},
			{ContainerPath: "/tmp/vgpu", HostPath: dir},
			{ContainerPath: "/etc/ld.so.preload", HostPath: filepath.Join(e.cache, "ld.so.preload"), ReadOnly: true},
		},
	}
	if diff := cmp.Diff(want, resp.ContainerResponses[0], cmpProto()); diff != "" {
		t.Errorf("main's response (-want +got):\n%s", diff)
	}
	// cachedir_test.go checks the directory and the region file in detail.
	if fi, err := os.Lstat(filepath.Join(dir, "region-1.cache")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("region file in %s: %v, %v; want the file the agent creates", dir, err, fi)
	}

	// The informer has not seen the first write: the second container must
	// still get its own entry, not the first one again.
	resp, err = e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatalf("Allocate eval: %v", err)
	}
	got := resp.ContainerResponses[0]
	if got.Envs["NVIDIA_VISIBLE_DEVICES"] != u[5] || got.Envs["CUDA_DEVICE_MEMORY_LIMIT_0"] != "2000m" {
		t.Errorf("eval's env = %v, want card %s with 2000m", got.Envs, u[5])
	}
	for _, m := range got.Mounts {
		if m.ContainerPath == "/etc/ld.so.preload" {
			t.Errorf("CUDA_DISABLE_CONTROL=true container got the ld.so.preload mount")
		}
	}
	wantCalls := []patch{
		{Pod: "train", Annotations: map[string]string{vgpuproto.AnnotationToAllocate: ";;" + entry(u[5], 2000, 0)}},
		{Pod: "train", Annotations: map[string]string{vgpuproto.AnnotationToAllocate: ";;", vgpuproto.AnnotationBindPhase: "success"}},
		{Pod: "train"}, // node lock released
	}
	if diff := cmp.Diff(wantCalls, e.rec.Calls()); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}

	// Nothing is pending any more.
	_, err = e.alloc.Allocate(context.Background(), request(1))
	wantCode(t, err, codes.NotFound)
}

func TestAllocateUpstreamFormatAndOrder(t *testing.T) {
	e := newEnv(t)
	e.rec.apply = true // the informer reflects writes at once
	u := e.uuids
	// Volcano v1.10 writes entries only for the containers asking for vGPUs.
	older := newPod("older").container("init-like", 0, nil).container("a", 1, nil).container("b", 1, nil).
		allocated(entry(u[0], 40960, 0)+";"+entry(u[1], 40960, 0), 100).build()
	newer := newPod("newer").container("a", 1, nil).allocated(entry(u[2], 40960, 0), 200).build()
	e.add(t, newer, older)

	for i, wantUUID := range []string{u[0], u[1], u[2]} {
		resp, err := e.alloc.Allocate(context.Background(), request(1))
		if err != nil {
			t.Fatalf("Allocate %d: %v", i, err)
		}
		if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != wantUUID {
			t.Errorf("Allocate %d served %s, want %s (oldest vgpu-time first)", i, got, wantUUID)
		}
	}
	for _, name := range []string{"older", "newer"} {
		obj, _, _ := e.indexer.GetByKey("ns/" + name)
		if got := obj.(*v1.Pod).Annotations[vgpuproto.AnnotationBindPhase]; got != "success" {
			t.Errorf("pod %s bind-phase = %q, want success", name, got)
		}
	}
}

// A pod the kubelet failed before its allocation was served keeps
// bind-phase allocating; the next request is the next pod's, whose entry it
// must get, not the dead pod's (found by the e2e fault campaign: a pod
// failed by an admission error handed its cards to the next pod admitted).
func TestAllocateSkipsTerminatedPods(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	failed := newPod("failed").container("a", 1, nil).allocated(entry(u[0], 20000, 0), 100).phase(v1.PodFailed).build()
	next := newPod("next").container("a", 1, nil).allocated(entry(u[1], 20000, 0), 200).build()
	e.add(t, failed, next)
	resp, err := e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != u[1] {
		t.Errorf("served %s, want %s (the failed pod's card is not the pending pod's)", got, u[1])
	}
	for _, c := range e.rec.Calls() {
		if c.Pod == "failed" {
			t.Errorf("the failed pod was written to: %+v", c)
		}
	}
}

func TestAllocateMIG(t *testing.T) {
	e := newEnv(t, func(c *config.Config, _ *allocate.Options) {
		c.NodeConfigs = []config.NodeConfig{{Name: nodeName, OperatingMode: config.OperatingModeMIG}}
	})
	u := e.uuids
	a := newPod("mig-a").container("c", 1, nil).allocated(u[4]+"[group2-0],NVIDIA,9000,0:", 1).build()
	b := newPod("mig-b").container("c", 1, nil).allocated(u[4]+"[group2-3],NVIDIA,4000,0:", 2).build()
	e.add(t, a, b)
	seen := map[string]bool{}
	for _, name := range []string{"mig-a", "mig-b"} {
		resp, err := e.alloc.Allocate(context.Background(), request(1))
		if err != nil {
			t.Fatalf("Allocate %s: %v", name, err)
		}
		r := resp.ContainerResponses[0]
		id := r.Envs["NVIDIA_VISIBLE_DEVICES"]
		if !strings.HasPrefix(id, "MIG-") || seen[id] {
			t.Errorf("%s got NVIDIA_VISIBLE_DEVICES=%q, want a fresh MIG UUID", name, id)
		}
		seen[id] = true
		if len(r.Mounts) != 0 || r.Envs["CUDA_DEVICE_MEMORY_LIMIT_0"] != "" {
			t.Errorf("%s: MIG container got libvgpu: mounts %v env %v", name, r.Mounts, r.Envs)
		}
	}
	geom, err := nvidiaGeometry(e, u[4])
	if err != nil || geom != "group2" {
		t.Errorf("card geometry = %q, %v; want group2", geom, err)
	}
	// A pod asking for another geometry on the busy card is refused.
	c := newPod("mig-c").container("c", 1, nil).allocated(u[4]+"[group1-0],NVIDIA,4000,0:", 3).build()
	e.add(t, c)
	_, err = e.alloc.Allocate(context.Background(), request(1))
	wantCode(t, err, codes.PermissionDenied)
}

func TestAllocateRefusals(t *testing.T) {
	type setup struct {
		e   *env
		pod *podBuilder
	}
	tests := []struct {
		name     string
		edit     func(s *setup)
		wantCode codes.Code
		wantMsg  string
		// wantFailed: bind-phase failed written and the lock released.
		wantFailed, wantUnlock bool
	}{
		{name: "annotations written for another node", wantCode: codes.PermissionDenied, wantMsg: `volcano.sh/vgpu-node="other-node"`,
			wantFailed: true,
			edit:       func(s *setup) { s.pod.annotate(vgpuproto.AnnotationNode, "other-node") }},
		{name: "card this node does not have", wantCode: codes.PermissionDenied, wantMsg: "GPU-forged is not registered", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.allocated(entry("GPU-forged", 1000, 10), 1) }},
		{name: "memory larger than the card", wantCode: codes.PermissionDenied, wantMsg: "exceeds the card's 40960", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.allocated(entry(s.e.uuids[0], 99999, 10), 1) }},
		{name: "cores above 100", wantCode: codes.PermissionDenied, wantMsg: "cores 150% exceed", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.allocated(entry(s.e.uuids[0], 1000, 150), 1) }},
		{name: "more memory than the container asks for", wantCode: codes.PermissionDenied, wantMsg: "asks for at most 1000 MiB", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) {
				s.pod.pod.Spec.Containers[0].Resources.Limits["volcano.sh/vgpu-memory"] = qty(1000)
				s.pod.allocated(entry(s.e.uuids[0], 30000, 0), 1)
			}},
		{name: "devices-to-allocate differs from vgpu-ids-new", wantCode: codes.PermissionDenied, wantMsg: "differs from volcano.sh/vgpu-ids-new", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.annotate(vgpuproto.AnnotationToAllocate, entry(s.e.uuids[1], 1000, 0)) }},
		{name: "malformed entry", wantCode: codes.PermissionDenied, wantMsg: `memory "lots"`, wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.allocated(s.e.uuids[0]+",NVIDIA,lots,0:", 1) }},
		{name: "card filled by other pods", wantCode: codes.PermissionDenied, wantMsg: "would have 41000 of 40960 memory", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) {
				running := newPod("running").container("c", 1, nil).allocated(entry(s.e.uuids[0], 40000, 0), 0).
					annotate(vgpuproto.AnnotationBindPhase, "success").phase(v1.PodRunning).build()
				finished := newPod("finished").container("c", 1, nil).allocated(entry(s.e.uuids[0], 40000, 0), 0).
					annotate(vgpuproto.AnnotationBindPhase, "success").phase(v1.PodSucceeded).build()
				s.e.add(nil, running, finished)
			}},
		{name: "stale bind-time", wantCode: codes.FailedPrecondition, wantMsg: "more than 5m0s", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.e.clock.Step(10 * time.Minute) }},
		{name: "unhealthy card", wantCode: codes.FailedPrecondition, wantMsg: "card unhealthy", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.e.unhealthy[s.e.uuids[0]] = true }},
		{name: "MIG instance on a shared card", wantCode: codes.PermissionDenied, wantMsg: "hami-core mode, the entry names a MIG instance", wantFailed: true, wantUnlock: true,
			edit: func(s *setup) { s.pod.allocated(s.e.uuids[0]+"[group1-0],NVIDIA,1000,0:", 1) }},
		{name: "entry size does not match the request", wantCode: codes.NotFound, wantMsg: "next entry has 2 cards, the kubelet asks for 1",
			edit: func(s *setup) { s.pod.allocated(entry(s.e.uuids[0], 1000, 0)+entry(s.e.uuids[1], 1000, 0), 1) }},
		{name: "not allocating", wantCode: codes.NotFound, wantMsg: "no pending vGPU pod",
			edit: func(s *setup) { s.pod.annotate(vgpuproto.AnnotationBindPhase, "success") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := &setup{e: e, pod: newPod("victim").container("c", 1, nil).allocated(entry(e.uuids[0], 1000, 0), 1)}
			tc.edit(s)
			e.add(t, s.pod.build())
			_, err := e.alloc.Allocate(context.Background(), request(1))
			wantCode(t, err, tc.wantCode)
			if err != nil && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			var failed, unlocked bool
			for _, c := range e.rec.Calls() {
				if c.Pod != "victim" {
					continue
				}
				failed = failed || c.Annotations[vgpuproto.AnnotationBindPhase] == "failed"
				unlocked = unlocked || c.Annotations == nil
				if c.Annotations[vgpuproto.AnnotationBindPhase] == "success" {
					t.Errorf("refused pod marked success")
				}
			}
			if failed != tc.wantFailed || unlocked != tc.wantUnlock {
				t.Errorf("marked failed %v, lock released %v; want %v, %v", failed, unlocked, tc.wantFailed, tc.wantUnlock)
			}
		})
	}
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("gRPC code = %v (%v), want %v", got, err, code)
	}
}

// The kubelet may ask before the agent's informer has the just-bound pod:
// with InformerWait the agent looks again instead of refusing. With
// LivePods it waits only if the API server had the pod pending when the
// kubelet asked: a pod bound after the request has its own request coming,
// and serving it to this one shifted every later pod of the node onto its
// successor's allocation (found by the e2e fault campaign: a request for a
// pod deleted during its admission took the next pod's cards).
func TestAllocateWaitsForTheInformer(t *testing.T) {
	tests := []struct {
		name     string
		wait     time.Duration
		live     []string // pods the API server has pending when the request comes; nil: no LivePods
		wantCode codes.Code
	}{
		{name: "waits and finds the pod", wait: 5 * time.Second, wantCode: codes.OK},
		{name: "no wait refuses at once", wait: 0, wantCode: codes.NotFound},
		{name: "waits for the pod the API server has", wait: 5 * time.Second, live: []string{"late"}, wantCode: codes.OK},
		{name: "does not wait for a pod bound after the request", wait: 5 * time.Second, live: []string{}, wantCode: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pod *v1.Pod
			e := newEnv(t, func(_ *config.Config, o *allocate.Options) {
				o.InformerWait = tc.wait
				if tc.live != nil {
					o.LivePods = func(context.Context) ([]*v1.Pod, error) {
						if len(tc.live) == 0 {
							return nil, nil
						}
						return []*v1.Pod{pod}, nil
					}
				}
			})
			pod = newPod("late").container("a", 1, nil).allocated(entry(e.uuids[0], 40960, 0), 100).build()
			added := make(chan struct{})
			go func() {
				defer close(added)
				time.Sleep(100 * time.Millisecond) // the informer's lag, in real time
				e.add(t, pod)
			}()
			start := time.Now()
			_, err := e.alloc.Allocate(context.Background(), request(1))
			<-added
			if tc.wantCode == codes.OK {
				if err != nil {
					t.Fatalf("Allocate: %v", err)
				}
				return
			}
			wantCode(t, err, tc.wantCode)
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %s, want at once", d)
			}
			for _, c := range e.rec.Calls() {
				if c.Pod == "late" {
					t.Errorf("the pod bound after the request was written to: %+v", c)
				}
			}
		})
	}
}
