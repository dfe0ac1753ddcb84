package app

import "net/http"

// Endpoints of the scheduler (docs/security.md):
//
//   - --listen-address (with --enable-metrics): Volcano serves
//     http.DefaultServeMux there after registering /metrics on it. Every
//     package linked in may have registered handlers on that mux in its
//     init: expvar (imported by prometheus/client_golang) adds /debug/vars,
//     which prints the command line and memory statistics to anyone who can
//     reach the port; Volcano's own main imports net/http/pprof, which adds
//     /debug/pprof/ (this binary does not).
//   - --healthz-address (with --enable-healthz): Volcano's own mux with
//     /healthz only.
//
// emptyDefaultServeMux gives Volcano a fresh http.DefaultServeMux, so the
// metrics port serves /metrics and nothing else. Call it once, before
// Volcano's Run registers /metrics.
func emptyDefaultServeMux() {
	http.DefaultServeMux = http.NewServeMux()
}
