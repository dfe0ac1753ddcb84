// Package bound bounds the placement-quality simulator's allocation from
// both sides, on one seed's arrivals at 100% and 130% arrival (docs/quality.md,
// "The limit").
//
// UpperBound (bound.go) bounds what any policy could allocate: the
// weak-duality value of a linear relaxation of the offline packing of each
// arrival prefix (node types, pod shapes, card and node cuts from
// dual-feasible functions), solved by the small dense simplex of lp.go
// (made dual-feasible by dualBound, so the bound is sound whatever the
// simplex ends with) and replayed through Curve.At's bins and rounding.
// bound_test.go checks it against exhaustive search on small instances.
//
// OfflinePacking (packing.go) is the other end: what placements that know
// the arrivals reach (the relaxation's solution rounded per node type, or
// used to choose which pods an online policy takes, or that policy
// alone), each replayed through the simulator; the best offline placement
// lies between the two. The online policy comes in as a sim.Factory, so
// this package needs only package sim; package quality passes its fragment
// policy and checks both ends against every policy.
package bound
