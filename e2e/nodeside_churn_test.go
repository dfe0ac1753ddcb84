//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/e2e/runc"
)

// EnvNodeSideChurn sets how long TestNodeSideChurn runs (a Go duration;
// default 20s). make faults sets it to FAULT_DURATION.
const EnvNodeSideChurn = "NODESIDE_CHURN"

// churnPod is a running pod of the churn with its current container.
type churnPod struct {
	job      string
	pod      v1.Pod
	limitMiB int64
	c        *runc.Container
	restarts int
}

// TestNodeSideChurn: Jobs come and go on the node while their containers
// are SIGKILLed and restarted (a kubelet restarting a container, with the
// same Allocate answer and region). Judged by the fake driver throughout:
// no container ever holds more than its limit, and once everything is gone
// no process holds device memory.
func TestNodeSideChurn(t *testing.T) {
	const ns = "node-side-churn"
	d := 20 * time.Second
	if v := os.Getenv(EnvNodeSideChurn); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", EnvNodeSideChurn, v, err)
		}
	}
	ctx := setup(t, ns, d+5*time.Minute)
	s := startNodeSide(ctx, t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var live []*churnPod
	var jobs, starts, kills int
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		switch op := rng.Intn(10); {
		case len(live) < 4 && op < 5:
			p := s.churnJob(ctx, t, ns, fmt.Sprintf("c%d", jobs), int64(1000*(1+rng.Intn(4))))
			jobs++
			p.c = s.churnStart(ctx, t, p, rng)
			starts++
			live = append(live, p)
		case len(live) > 0 && op < 8:
			p := live[rng.Intn(len(live))]
			if err := p.c.Kill(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			s.checkHeld(t, p)
			if err := p.c.Delete(); err != nil {
				t.Fatal(err)
			}
			kills++
			p.restarts++
			p.c = s.churnStart(ctx, t, p, rng)
			starts++
		case len(live) > 0:
			i := rng.Intn(len(live))
			s.churnStop(ctx, t, ns, live[i])
			live = append(live[:i], live[i+1:]...)
		}
	}
	for _, p := range live {
		s.churnStop(ctx, t, ns, p)
	}
	err := cluster.Poll(ctx, 30*time.Second, "the driver to hold no memory of the churn", func(context.Context) (bool, error) {
		for _, dev := range s.Driver.Stats().Devices {
			for _, p := range dev.Processes {
				if p.Alive && p.Bytes > 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("node-side churn: %s, %d jobs, %d containers started, %d SIGKILLed and restarted", d, jobs, starts, kills)
}

func (s *nodeSide) churnJob(ctx context.Context, t *testing.T, ns, name string, memMiB int64) *churnPod {
	task := framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: memMiB,
		NodeSelector: map[string]string{"kubernetes.io/hostname": s.Node.Name}}
	pods := runJob(ctx, t, ns, name, task)
	pod, ok := pods["w"]
	if len(pods) != 1 || !ok {
		t.Fatalf("job %s: %d pods, want one of task w", name, len(pods))
	}
	return &churnPod{job: name, pod: pod, limitMiB: memMiB}
}

// churnStart starts (or restarts) the pod's container, filling its limit
// in chunks of a random size, and waits until it is full.
func (s *nodeSide) churnStart(ctx context.Context, t *testing.T, p *churnPod, rng *rand.Rand) *runc.Container {
	alloc, err := s.Allocation(ctx, p.pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%s-r%d", p.job, p.restarts)
	chunk := fmt.Sprint(16 << rng.Intn(4))
	c, err := s.Runtime.Start(ctx, s.ContainerSpec(id, alloc, "fill", chunk))
	if err != nil {
		t.Fatal(err)
	}
	if refused := output(ctx, t, c, "refused"); refused != "2" {
		t.Errorf("container %s: the allocation past its limit returned %s, want 2", id, refused)
	}
	s.checkHeld(t, &churnPod{c: c, limitMiB: p.limitMiB})
	return c
}

// checkHeld: what the driver saw the container hold, at its peak, is within its limit.
func (s *nodeSide) checkHeld(t *testing.T, p *churnPod) {
	t.Helper()
	for d := range s.Driver.Stats().Devices {
		if peak := s.Driver.GroupPeak(d, p.c.ID); peak > uint64(p.limitMiB)<<20 {
			t.Errorf("container %s held %d MiB on device %d, over its %d MiB limit", p.c.ID, peak>>20, d, p.limitMiB)
		}
	}
}

func (s *nodeSide) churnStop(ctx context.Context, t *testing.T, ns string, p *churnPod) {
	s.checkHeld(t, p)
	if err := p.c.Delete(); err != nil {
		t.Error(err)
	}
	if err := cluster.DeleteJob(ctx, ns, p.job); err != nil {
		t.Error(err)
	}
}
