// Package testkit holds the test builders and checks the backends' tests
// share: pods and nodes built from resource limits and annotation pairs,
// Devices built from a node and accounted pods, and the accounting round
// trip every backend's fuzz target checks (a refused record changes
// nothing; an accepted one is accounted once and given back exactly).
//
// It is imported by tests only; helpers fail the test through testing.TB
// and never panic.
package testkit
