package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNewClientAsksForProtobuf checks that the agents' client asks the API
// server for protobuf and takes JSON back from a server without it (the
// kubelet's content negotiation): a real API server then answers the pod
// watch in protobuf, which the agent decodes several times faster.
func TestNewClientAsksForProtobuf(t *testing.T) {
	accepts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case accepts <- r.Header.Get("Accept"):
		default:
		}
		// A server that speaks only JSON, as the fallback must handle.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"p","namespace":"ns"}}]}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(kubeconfig, "test-agent")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods from a JSON-only server: %v", err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "p" {
		t.Errorf("pods %+v, want the one the server sent", pods.Items)
	}
	accept := <-accepts
	if !strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf") || !strings.Contains(accept, "application/json") {
		t.Errorf("Accept %q, want protobuf first and JSON as the fallback", accept)
	}
}
