package app

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Packages linked into the scheduler register handlers on
// http.DefaultServeMux (expvar's /debug/vars at least); Volcano serves that
// mux on --listen-address, and after emptyDefaultServeMux it serves none of
// them. e2e/endpoints_test.go checks the real binary's ports.
func TestEmptyDefaultServeMux(t *testing.T) {
	get := func(path string) int {
		rec := httptest.NewRecorder()
		http.DefaultServeMux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code := get("/debug/vars"); code != http.StatusOK {
		t.Fatalf("before: GET /debug/vars = %d, want 200 (expvar is linked in; otherwise this test proves nothing)", code)
	}
	saved := http.DefaultServeMux
	t.Cleanup(func() { http.DefaultServeMux = saved })
	emptyDefaultServeMux()
	for _, path := range []string{"/debug/vars", "/debug/pprof/", "/"} {
		if code := get(path); code != http.StatusNotFound {
			t.Errorf("after: GET %s = %d, want 404", path, code)
		}
	}
}
