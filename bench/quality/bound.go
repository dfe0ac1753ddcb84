package quality

import "github.com/vgpushare/vshare/bench/quality/bound"

// Bound is bound.Bound: an upper bound on the allocation any policy can
// reach at 100% and 130% arrival, or what offline placements reach.
type Bound = bound.Bound

// UpperBound is bound.UpperBound: what any policy could allocate on the
// arrivals of one seed.
func UpperBound(t *Trace, seed int64) (Bound, error) { return bound.UpperBound(t, seed) }

// MeanBound is bound.MeanBound: UpperBound averaged over the seeds as
// Evaluate averages a policy.
func MeanBound(t *Trace, seeds []int64) (Bound, error) { return bound.MeanBound(t, seeds) }

// OfflinePacking is bound.OfflinePacking with the fragment policy as the
// online policy the offline placements start from and must beat.
func OfflinePacking(t *Trace, seed int64) (Bound, error) {
	return bound.OfflinePacking(t, seed, fragmentFactory)
}

// MeanOfflinePacking is OfflinePacking averaged over the seeds as
// Evaluate averages a policy.
func MeanOfflinePacking(t *Trace, seeds []int64) (Bound, error) {
	return bound.MeanOfflinePacking(t, seeds, fragmentFactory)
}

// OfflineFactory is the factory of the placement OfflinePacking keeps for
// arrival point a: the best offline plan for the run's seed, or the
// fragment policy when no plan beats it (bound.OfflineFactory).
func OfflineFactory(a int) Factory { return bound.OfflineFactory(a, fragmentFactory) }

// fragmentFactory is the fragment policy's factory.
func fragmentFactory(env Env) (Policy, error) {
	f, err := FactoryFor(PolicyFragment)
	if err != nil {
		return nil, err
	}
	return f(env)
}
