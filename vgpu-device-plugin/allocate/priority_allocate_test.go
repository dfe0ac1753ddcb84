package allocate_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// A high-priority container gets CUDA_TASK_PRIORITY=0; one whose priority is
// out of range is refused with InvalidArgument and the resource named.
func TestAllocateTaskPriority(t *testing.T) {
	e := newEnv(t)
	u := e.uuids
	e.add(t, newPod("high").container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000, "volcano.sh/vgpu-cores": 30, "volcano.sh/vgpu-priority": 0}).
		allocated(entry(u[7], 1000, 30), 100).build())
	resp, err := e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := resp.ContainerResponses[0].Envs[allocate.EnvTaskPriority]; got != "0" {
		t.Errorf("%s = %q, want \"0\"", allocate.EnvTaskPriority, got)
	}

	e = newEnv(t)
	e.add(t, newPod("bad").container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000, "volcano.sh/vgpu-cores": 30, "volcano.sh/vgpu-priority": 3}).
		allocated(entry(e.uuids[7], 1000, 30), 100).build())
	_, err = e.alloc.Allocate(context.Background(), request(1))
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "volcano.sh/vgpu-priority=3") {
		t.Errorf("error %q does not name the resource and its value", err)
	}
}
