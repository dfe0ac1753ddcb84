// Package report is the reports of `kubectl vshare`: their JSON and YAML
// schema (schema.go, documented in docs/kubectl-vshare.md) and their table
// and wide renderings (Render). The commands (package kubectlvshare) fill
// them from what the API server holds; this package only presents them.
package report
