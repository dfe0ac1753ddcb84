//go:build e2e

package toolkit_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/runc"
)

// startContainerd runs a containerd of its own (its root, state and
// sockets in dir, no CRI plugin) with env added to its environment, and
// returns its socket.
func startContainerd(t *testing.T, dir string, env ...string) string {
	t.Helper()
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (apt-get install containerd): %v", tool, err)
		}
	}
	sock := filepath.Join(dir, "containerd.sock")
	conf := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", conf)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		log.Close()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if exec.Command("ctr", "--address", sock, "version").Run() == nil {
			return sock
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("containerd did not come up:\n%s", b)
		}
	}
}

// containerd 1.6's runc v2 shim runs the stand-in as the runtime binary
// (the BinaryName option, which `ctr run --runc-binary` sets) in
// containerd's own environment, where XDG_CONFIG_HOME names the stand-in's
// configuration: the container gets its card. A create the stand-in fails
// reaches containerd's caller with the stand-in's error, read from runc's
// log as containerd reads runc's own.
func TestContainerdRunsTheStandIn(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	sock := startContainerd(t, dir, "XDG_CONFIG_HOME="+n.xdg)
	rootfs := filepath.Join(dir, "bundle", "rootfs")
	if err := runc.WriteBundle(filepath.Dir(rootfs), runc.Spec{ID: "probe", Args: []string{"/probe"},
		Copies: []runc.Mount{{Host: n.probe, Container: "/probe"}}, Files: n.files}); err != nil {
		t.Fatal(err)
	}
	ctrRun := func(id, env string) (string, error) {
		out, err := exec.Command("ctr", "--address", sock, "run", "--rm", "--runc-binary", n.runtime,
			"--env", env, "--rootfs", rootfs, id, "/probe").CombinedOutput()
		return string(out), err
	}
	out, err := ctrRun("card1", "NVIDIA_VISIBLE_DEVICES=1")
	want := "dev=nvidia-uvm,nvidia1,nvidiactl\nnvml_init=0 count=1\nnvml 0 rc=0 uuid=" + n.cards[1].UUID + "\n"
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("ctr run with NVIDIA_VISIBLE_DEVICES=1: %v\n%s\nwant it to contain:\n%s", err, out, want)
	}
	out, err = ctrRun("unknown", "NVIDIA_VISIBLE_DEVICES=GPU-nope")
	if want := "OCI runtime create failed: nvidia-container-runtime: NVIDIA_VISIBLE_DEVICES=GPU-nope: GPU-nope: unknown device"; err == nil || !strings.Contains(out, want) {
		t.Errorf("ctr run with an unknown device: %v\n%s\nwant an error containing %q", err, out, want)
	}
}
