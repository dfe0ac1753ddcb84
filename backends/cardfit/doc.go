// Package cardfit holds what fitting containers to a node's cards has in
// common across the card-sharing backends (vGPU, HAMi Ascend): the card
// selectors users write in pod annotations, and the node score computed
// from the chosen cards' fullness under the binpack and spread policies.
//
// Each backend keeps its own per-card checks and rejection reasons, which
// name what only it models; cardfit holds the rules that must read the
// same everywhere.
package cardfit
