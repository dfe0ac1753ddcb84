// Package cardfit holds what fitting containers to a node's cards has in
// common across the card-sharing backends (vGPU, HAMi Ascend): the card
// selectors users write in pod annotations (select.go), the card-cordon
// annotations (cordon.go), the node score computed from the chosen cards'
// fullness under the binpack and spread policies (score.go), and the walk
// of a container's check over the cards that choose, explain and
// explain-by-card share (check.go): Fitting gathers the cards a container
// may take, Explain counts why the others were rejected when it fits on
// too few, Verdicts gives kubectl vshare the reason card by card.
//
// Each backend keeps its own per-card check (a Check, returning one of its
// Reasons), the messages of its reasons (its describe function, named by
// Explain and Verdicts) and the rules that only it models (which cards
// selectCards takes, NUMA, network groups, init containers); cardfit holds
// the rules that must read the same everywhere. Its generic helpers
// inline into the backends' per-node loops: they cost no allocation.
package cardfit
