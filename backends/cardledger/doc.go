// Package cardledger is the per-card accounting the card-sharing backends
// have in common: what each card holds (Usage), what each accounted pod
// holds on a node (Pods, keyed by Key), and the rules for turning a pod's
// allocation annotation into a holding and back (Ledger): account it once,
// refuse a different record for the same pod, give back exactly what was
// taken, and sum it for queue accounting.
//
// A backend keeps its own card and holding types, which know what only it
// models (MIG positions, vNPU templates, PodGroups), and embeds or calls
// the pieces here for the rest. Apply functions are the backend's: they add
// (sign 1) or remove (sign -1) a holding, and the ledger calls them with
// opposite signs for the same holding, so allocation and release are exact
// inverses by construction.
//
// Nothing here is safe for concurrent use; the backends' Devices document
// their own locking (readers may share, writers need exclusive access).
package cardledger
