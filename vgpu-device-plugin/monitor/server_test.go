package monitor

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Serve binds exactly the address it is given (loopback stays loopback)
// and answers /metrics only; e2e/endpoints_test.go lists the real agent's
// sockets.
func TestServeOnlyMetricsWhereConfigured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", prometheus.NewRegistry(), ready) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	addr := (<-ready).(*net.TCPAddr)
	if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("bound %v, want 127.0.0.1", addr)
	}
	for path, want := range map[string]int{
		"/metrics":      http.StatusOK,
		"/":             http.StatusNotFound,
		"/metrics/x":    http.StatusNotFound,
		"/debug/pprof/": http.StatusNotFound,
		"/debug/vars":   http.StatusNotFound,
		"/healthz":      http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}
