// Package fakekubelet plays the kubelet's side of the device-plugin API in
// tests: the Registration service on kubelet.sock, recording what plugins
// register, and a client connection to a plugin's socket.
package fakekubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Timeout bounds Wait and Dial.
const Timeout = 10 * time.Second

// Kubelet serves the Registration service on <dir>/kubelet.sock.
type Kubelet struct {
	srv *grpc.Server
	// Requests receives each registration, buffered for a few.
	Requests chan *pluginapi.RegisterRequest
}

// Register implements the Registration service.
func (k *Kubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.Requests <- r
	return &pluginapi.Empty{}, nil
}

// Start serves on <dir>/kubelet.sock (replacing a stale one) until Stop or
// the end of the test.
func Start(t testing.TB, dir string) *Kubelet {
	t.Helper()
	path := filepath.Join(dir, "kubelet.sock")
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{srv: grpc.NewServer(), Requests: make(chan *pluginapi.RegisterRequest, 4)}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// Stop stops serving, as a kubelet going away does.
func (k *Kubelet) Stop() { k.srv.Stop() }

// Wait returns the next registration, failing the test after Timeout.
func (k *Kubelet) Wait(t testing.TB) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.Requests:
		return r
	case <-time.After(Timeout):
		t.Fatal("timed out waiting for registration")
		return nil
	}
}

// Dial connects to a plugin's socket as the kubelet does; the connection
// is closed at the end of the test.
func Dial(t testing.TB, path string) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithBlock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ShortTempDir returns a directory removed at the end of the test, with a
// short path: a unix socket's path must fit in about 100 bytes, more than
// t.TempDir leaves under a long test name.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
