package quality

import "math"

// The seed spread. Every policy sees the same arrivals for a seed, so a
// policy's value over the seeds 42..51 is a sample of n runs; its spread
// is the sample standard deviation (n-1 in the denominator) and the 95%
// confidence interval of the mean, mean ± t(0.975, n-1)·sd/√n.
// A comparison of two policies pairs their runs by seed (Paired).

// Mean is the arithmetic mean of xs, NaN when xs is empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// SampleSD is the sample standard deviation of xs (Bessel's n-1), NaN
// for fewer than two values.
func SampleSD(xs []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	m := Mean(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// CI95 is the half-width of the 95% confidence interval of the mean of
// xs (Student t with n-1 degrees of freedom), NaN for fewer than two
// values.
func CI95(xs []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	return T975(len(xs)-1) * SampleSD(xs) / math.Sqrt(float64(len(xs)))
}

// t975 are Student t's 0.975 quantiles for 1..30 degrees of freedom (to
// three decimals, as printed in every statistics table).
var t975 = [...]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

// z975 is the standard normal's 0.975 quantile.
const z975 = 1.959964

// T975 is the 0.975 quantile of Student's t with df degrees of freedom:
// from the table up to 30 (ten seeds use df 9: 2.262), beyond it the
// normal quantile with the first two terms of its Cornish-Fisher
// expansion (within 0.001 of the exact value there). NaN for df < 1.
func T975(df int) float64 {
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(t975):
		return t975[df-1]
	}
	z, v := z975, float64(df)
	return z + (z*z*z+z)/(4*v) + (5*z*z*z*z*z+16*z*z*z+3*z)/(96*v*v)
}

// Spread is a sample's mean, standard deviation and 95% CI half-width.
type Spread struct {
	N            int
	Mean, SD, CI float64
}

// SpreadOf summarises xs.
func SpreadOf(xs []float64) Spread {
	return Spread{N: len(xs), Mean: Mean(xs), SD: SampleSD(xs), CI: CI95(xs)}
}

// Excludes0 reports whether the 95% interval mean ± CI lies entirely on
// one side of zero (false when the CI is unknown: fewer than two values).
func (s Spread) Excludes0() bool {
	return !math.IsNaN(s.CI) && math.Abs(s.Mean) > s.CI
}

// Paired is the per-seed difference a - b of a value over the seeds both
// results ran, in a's seed order: the paired comparison, since both
// policies saw the same arrivals for a seed. get picks the value
// (SeedUnalloc130, SeedAlloc100 ...).
func Paired(a, b *Result, get func(*Result) []float64) []float64 {
	bv := map[int64]float64{}
	for i, v := range get(b) {
		bv[b.Seeds[i]] = v
	}
	var d []float64
	for i, v := range get(a) {
		if w, ok := bv[a.Seeds[i]]; ok {
			d = append(d, v-w)
		}
	}
	return d
}

// SeedAlloc100Of and SeedUnalloc130Of are Paired's usual getters.
func SeedAlloc100Of(r *Result) []float64   { return r.SeedAlloc100 }
func SeedUnalloc130Of(r *Result) []float64 { return r.SeedUnalloc130() }
