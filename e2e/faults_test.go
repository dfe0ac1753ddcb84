//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// Knobs of the fault campaign (`make faults` sets them).
const (
	// EnvFaultSeeds lists the seeds: "1,2" or "1-10".
	EnvFaultSeeds = "FAULT_SEEDS"
	// EnvFaultDuration is each seed's fault phase, e.g. "4m".
	EnvFaultDuration = "FAULT_DURATION"
)

// The short campaign `make e2e` runs: one seed without and one with the
// node lock, 40 s of faults each.
const (
	defaultFaultSeeds    = "1,2"
	defaultFaultDuration = 40 * time.Second
)

// TestFaultCampaign runs the randomized fault campaign (docs/reliability.md)
// for each seed: Jobs of mixed vGPU sizes are submitted and deleted
// continuously while the scheduler is killed and restarted or crashes inside
// a session (deviceshare's test-only VSHARE_TEST_CRASH_AT_BIND), agents are
// killed in the middle of Allocate, pods are deleted between scheduling and
// the agent's Allocate, kubelet.sock is recreated and cards turn unhealthy
// and healthy again; even seeds run with deviceshare.NodeLockEnable and a
// 10 s NodeLockExpiry, so locks nobody releases expire. The auditor checks
// every card continuously and the final state; the test fails on any
// violation, with its evidence.
func TestFaultCampaign(t *testing.T) {
	seeds, err := parseSeeds(envOr(EnvFaultSeeds, defaultFaultSeeds))
	if err != nil {
		t.Fatal(err)
	}
	duration := defaultFaultDuration
	if v := os.Getenv(EnvFaultDuration); v != "" {
		if duration, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", EnvFaultDuration, v, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(seeds))*(duration+8*time.Minute))
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log tails:\n%s", cluster.Tails(40))
		}
	})
	restore, err := cluster.PrepareFaults(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Errorf("restore the cluster after the campaign: %v", err)
		}
	})
	var reports []*framework.CampaignReport
	for _, seed := range seeds {
		rep, err := cluster.RunFaultCampaign(ctx, framework.CampaignOptions{
			Seed: seed, Duration: duration, NodeLock: seed%2 == 0, Log: testWriter{t},
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Log(rep.Summary())
		for _, v := range rep.Violations {
			t.Errorf("seed %d: %s", seed, v)
		}
		reports = append(reports, rep)
	}
	t.Log(totals(reports))
}

// totals sums the reports of every seed.
func totals(reports []*framework.CampaignReport) string {
	var sum framework.CampaignReport
	sum.Faults = map[framework.FaultKind]int{}
	for _, r := range reports {
		sum.Duration += r.Duration
		sum.JobsSubmitted += r.JobsSubmitted
		sum.JobsDeleted += r.JobsDeleted
		sum.JobsFailed += r.JobsFailed
		sum.PodsCreated += r.PodsCreated
		sum.PodsBound += r.PodsBound
		sum.PodsAdmitted += r.PodsAdmitted
		sum.PodsFailedAdmission += r.PodsFailedAdmission
		sum.Samples += r.Samples
		sum.KeptAcrossRestarts += r.KeptAcrossRestarts
		sum.Locks.Taken += r.Locks.Taken
		sum.Locks.Expired += r.Locks.Expired
		sum.Locks.TakenOver += r.Locks.TakenOver
		sum.LockProbes += r.LockProbes
		sum.Violations = append(sum.Violations, r.Violations...)
		for k, v := range r.Faults {
			sum.Faults[k] += v
		}
	}
	var faults []string
	injected := 0
	for _, k := range framework.AllFaults() {
		faults = append(faults, fmt.Sprintf("%s=%d", k, sum.Faults[k]))
		injected += sum.Faults[k]
	}
	return fmt.Sprintf("fault campaign: %d runs, %s of faults; jobs %d submitted, %d deleted, %d failed by Volcano; pods %d created, %d bound, %d admitted, %d failed admission; %d faults injected (%s); %d auditor samples; %d allocations kept across restarts; locks %d taken, %d expired (%d taken over), %d probes; %d violations",
		len(reports), sum.Duration.Round(time.Second), sum.JobsSubmitted, sum.JobsDeleted, sum.JobsFailed, sum.PodsCreated, sum.PodsBound,
		sum.PodsAdmitted, sum.PodsFailedAdmission, injected, strings.Join(faults, " "), sum.Samples, sum.KeptAcrossRestarts,
		sum.Locks.Taken, sum.Locks.Expired, sum.Locks.TakenOver, sum.LockProbes, len(sum.Violations))
}

// parseSeeds reads "1,2,5" or "1-10" (or a mix: "1-3,7").
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %q is not a seed or a range of seeds", EnvFaultSeeds, s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%s=%q: %q is not a range of seeds", EnvFaultSeeds, s, part)
			}
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	return out, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
