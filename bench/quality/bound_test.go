package quality

import (
	"math"
	"os"
	"testing"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// smallTrace is a three-node trace of mostly small shares whose arrivals come
// near 100% and 130% of its capacity for most seeds.
func smallTrace() *Trace {
	return &Trace{
		Name: "small",
		Nodes: []Node{
			{Name: "n0", CPU: 64000, Memory: 262144, GPUs: 8, Model: "A"},
			{Name: "n1", CPU: 8000, Memory: 32768, GPUs: 1, Model: "B"},
			{Name: "n2", CPU: 6000, Memory: 32768, GPUs: 1, Model: "A"},
		},
		Pods: []Pod{
			{Name: "p7", CPU: 8000, Memory: 16384, NumGPU: 2, Milli: 1000},
			{Name: "p8", CPU: 2000, Memory: 4096, NumGPU: 1, Milli: 320},
			{Name: "p0", CPU: 4000, Memory: 8192, NumGPU: 1, Milli: 810},
			{Name: "p1", CPU: 2000, Memory: 4096, NumGPU: 1, Milli: 470},
			{Name: "p2", CPU: 5000, Memory: 4096, NumGPU: 1, Milli: 1000, Spec: []string{"A"}},
			{Name: "p3", CPU: 1000, Memory: 2048, NumGPU: 1, Milli: 50},
			{Name: "p4", CPU: 1000, Memory: 2048, NumGPU: 1, Milli: 230},
			{Name: "p5", CPU: 500, Memory: 1024, NumGPU: 1, Milli: 110},
			{Name: "p6", CPU: 3000, Memory: 2048},
		},
	}
}

// TestUpperBoundSmallTrace checks UpperBound against every reference
// policy's run on a small trace, seed by seed.
func TestUpperBoundSmallTrace(t *testing.T) {
	tr := smallTrace()
	checked := 0
	for seed := int64(1); seed <= 100; seed++ {
		b, err := UpperBound(tr, seed)
		if err != nil {
			// The arrivals jump over a bin: no policy has a value there.
			c := runSeed(t, tr, PolicyBestFit, seed)
			if !math.IsNaN(c.At(100)) && !math.IsNaN(c.At(MaxArrival)) {
				t.Errorf("seed %d: %v, but BestFit's curve has both points", seed, err)
			}
			continue
		}
		checked++
		for _, name := range ReferencePolicies() {
			c := runSeed(t, tr, name, seed)
			for a, bound := range map[int]float64{100: b.Alloc100, MaxArrival: b.Alloc130} {
				if got := c.At(a); math.IsNaN(got) || got > bound {
					t.Errorf("seed %d: %s allocates %.2f%% at %d%% arrival, above the bound %.2f%%", seed, name, got, a, bound)
				}
			}
		}
	}
	if checked < 8 {
		t.Errorf("only %d of 100 seeds reach both arrival points; want at least 8 to check", checked)
	}
	t.Logf("%d seeds checked", checked)
}

// arrivedAt is the arrived GPU % Curve.At would report at a if every pod
// were placed: the most any bound needs to be.
func arrivedAt(t *Trace, seed int64, a int) float64 {
	arr := Arrange(t, seed)
	gpus := t.Capacity() / MilliPerGPU
	c := make(Curve, len(arr.Pods))
	var arrived int64
	for i := range arr.Pods {
		arrived += arr.Pods[i].GPUMilli()
		c[i] = sim.NewEvent(arrived, arrived, gpus)
	}
	return c.At(a)
}

// TestUpperBoundTuningTraces checks, on the five tuning traces at seed 42,
// that every reference policy and fragment allocate at most the bound at
// 100% and 130% arrival, and that the bound is at most 100% and at most
// what arrived.
func TestUpperBoundTuningTraces(t *testing.T) {
	if raceEnabled && os.Getenv("VSHARE_QUALITY_FULL") == "" {
		t.Skip("slow under -race; set VSHARE_QUALITY_FULL=1 to run it")
	}
	if testing.Short() {
		t.Skip("full trace runs skipped in -short mode")
	}
	policies := append(ReferencePolicies(), PolicyFragment)
	for _, name := range []string{"default", "gpushare100", "multigpu50", "gpuspec33", "cpu250"} {
		t.Run(name, func(t *testing.T) {
			tr := loadTrace(t, name)
			b, err := UpperBound(tr, 42)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("bound %.2f%% at 100%% arrival, %.2f%% at 130%%", b.Alloc100, b.Alloc130)
			for a, v := range map[int]float64{100: b.Alloc100, MaxArrival: b.Alloc130} {
				if arr := arrivedAt(tr, 42, a); v > 100 || v > arr {
					t.Errorf("bound %.2f%% at %d%% arrival, want at most 100%% and at most the %.2f%% arrived", v, a, arr)
				}
			}
			for _, p := range policies {
				c := runSeed(t, tr, p, 42)
				a100, a130 := c.At(100), c.At(MaxArrival)
				t.Logf("%s: %.2f%% / %.2f%%", p, a100, a130)
				if a100 > b.Alloc100 || a130 > b.Alloc130 {
					t.Errorf("%s allocates %.2f%% / %.2f%% at 100%% / 130%% arrival, above the bound %.2f%% / %.2f%%",
						p, a100, a130, b.Alloc100, b.Alloc130)
				}
			}
		})
	}
}

func TestBoundErrors(t *testing.T) {
	if _, err := MeanBound(smallTrace(), nil); err == nil {
		t.Error("MeanBound without seeds: want an error")
	}
	if _, err := UpperBound(&Trace{Name: "empty", Pods: smallTrace().Pods}, 1); err == nil {
		t.Error("UpperBound without nodes: want an error")
	}
}

// TestMeanBound checks that the mean over seeds is the mean of the seeds'
// bounds, as Evaluate averages a policy's values.
func TestMeanBound(t *testing.T) {
	tr := smallTrace()
	var seeds []int64
	for s := int64(1); len(seeds) < 3 && s <= 100; s++ {
		if _, err := UpperBound(tr, s); err == nil {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) < 3 {
		t.Fatalf("only seeds %v of 1..100 reach both arrival points", seeds)
	}
	m, err := MeanBound(tr, seeds)
	if err != nil {
		t.Fatal(err)
	}
	var want Bound
	for _, s := range seeds {
		b, err := UpperBound(tr, s)
		if err != nil {
			t.Fatal(err)
		}
		want.Alloc100 += b.Alloc100 / 3
		want.Alloc130 += b.Alloc130 / 3
	}
	if m != want {
		t.Errorf("MeanBound = %+v, want %+v", m, want)
	}
}
