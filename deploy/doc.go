// Package deploy holds what installs vshare on a cluster and the checks that
// keep it honest: the Helm chart (helm/vshare), the plain manifests rendered
// from it (manifests/, `make deploy-manifests`), the Grafana dashboard
// (dashboards/), and functions that read a rendered volcano-scheduler.conf
// and node agent command line with the components' own parsers, so a chart
// value that the scheduler or the agent would reject fails a test instead
// of a rollout.
//
// The tests of this package check the plain manifests and the chart's
// values without helm; e2e/deploy_test.go renders the chart with helm and
// creates every object with a server-side dry run.
package deploy
