//go:build e2e

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdConfig is the node's containerd 1.6 configuration: its own
// root, state and sockets under the node's directory, the CRI plugin with
// the pause image imported beforehand (no registry here), the overlayfs
// snapshotter, cgroupfs (SystemdCgroup false), the CNI bridge, and the
// toolkit's runtime handler as the default runtime when there is one, as
// `nvidia-ctk runtime configure --runtime=containerd --set-as-default` and
// the GPU operator leave it.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.Dir}}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "{{.Sock}}"

[ttrpc]
  address = "{{.Sock}}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Sandbox}}"
  # This VM refuses negative OOM score adjustments.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "{{.Default}}"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{{.Runc}}"
        SystemdCgroup = false
{{- with .Handler}}
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{{.Name}}]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{{.Name}}.options]
        BinaryName = "{{.BinaryName}}"
        SystemdCgroup = false
{{- end}}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBin}}"
    conf_dir = "{{.Dir}}/cni/net.d"
    max_conf_num = 1
`))

// cniConfig is the pods' network: a bridge with host-local addresses, its
// gateway the route to the host (and through kube-proxy to Services). No
// masquerading: pods talk to this host only.
var cniConfig = template.Must(template.New("cni").Parse(`{
  "cniVersion": "1.0.0",
  "name": "vshare-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{.Bridge}}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "{{.Subnet}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "{{.Dir}}/cni/ipam"
      }
    }
  ]
}
`))

// CNIBinDir is where Debian's containernetworking-plugins installs the
// plugins.
const CNIBinDir = "/usr/lib/cni"

// runcPath finds runc (Debian installs it in /usr/sbin).
func runcPath() (string, error) {
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/runc"); err == nil {
		return "/usr/sbin/runc", nil
	}
	return "", fmt.Errorf("runc not found (apt-get install runc)")
}

// RealNodeUnavailable says what this machine lacks to run a real node: root,
// or one of Debian's packages (.ci/run installs them); nil when nothing.
func RealNodeUnavailable() error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (containerd, the kubelet, network and mounts)")
	}
	for _, tool := range []struct{ cmd, pkg string }{
		{"containerd", "containerd"}, {"containerd-shim-runc-v2", "containerd"}, {"ctr", "containerd"},
		{"iptables", "iptables"}, {"ip", "iproute2"},
	} {
		if _, err := exec.LookPath(tool.cmd); err != nil {
			return fmt.Errorf("%s not found (apt-get install %s)", tool.cmd, tool.pkg)
		}
	}
	if _, err := runcPath(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(CNIBinDir, "bridge")); err != nil {
		return fmt.Errorf("CNI bridge plugin missing (apt-get install containernetworking-plugins): %w", err)
	}
	return nil
}

// startContainerd writes the node's containerd and CNI configuration and
// starts containerd.
func (n *RealNode) startContainerd(ctx context.Context) error {
	if err := RealNodeUnavailable(); err != nil {
		return err
	}
	runc, err := runcPath()
	if err != nil {
		return err
	}
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	n.containerdSock = filepath.Join(n.Dir, "containerd", "containerd.sock")
	data := map[string]any{"Dir": n.Dir, "Sock": n.containerdSock, "Sandbox": n.opts.SandboxImage,
		"Runc": runc, "Default": "runc", "CNIBin": CNIBinDir, "Handler": n.opts.Runtime}
	var env []string
	if h := n.opts.Runtime; h != nil {
		data["Default"] = h.Name
		env = h.Env
	}
	conf := filepath.Join(n.Dir, "containerd", "config.toml")
	if err := renderFile(conf, containerdConfig, data); err != nil {
		return err
	}
	if err := renderFile(filepath.Join(n.Dir, "cni", "net.d", "10-vshare.conflist"), cniConfig,
		map[string]string{"Bridge": CNIBridge, "Subnet": PodCIDR, "Dir": n.Dir}); err != nil {
		return err
	}
	p, err := startProcess(n.c.LogDir(), "containerd", "containerd", []string{"--config", conf, "--log-level", "info"}, env)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.containerd = p
	n.mu.Unlock()
	return n.c.poll(ctx, time.Minute, "containerd's CRI", func(ctx context.Context) (bool, error) {
		_, err := n.cri(ctx, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			_, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		})
		return err == nil, err
	}, p)
}

func renderFile(path string, t *template.Template, data any) error {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ImportImage imports an OCI image archive into containerd's k8s.io
// namespace, the CRI plugin's, with ctr (as an air-gapped node is loaded).
func (n *RealNode) ImportImage(ctx context.Context, archive string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", n.containerdSock, "--namespace", "k8s.io",
		"images", "import", "--snapshotter", "overlayfs", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w\n%s", archive, err, out)
	}
	return nil
}

// cri runs f with a CRI runtime client of the node's containerd.
func (n *RealNode) cri(ctx context.Context, f func(context.Context, runtimeapi.RuntimeServiceClient) error) (bool, error) {
	conn, err := grpc.DialContext(ctx, "unix://"+n.containerdSock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", n.containerdSock)
		}))
	if err != nil {
		return false, fmt.Errorf("dial containerd: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return true, f(ctx, runtimeapi.NewRuntimeServiceClient(conn))
}

// removeSandboxes stops and removes every pod sandbox through CRI: the
// containers are killed and the CNI plugin releases their network, as the
// kubelet does for a deleted pod.
func (n *RealNode) removeSandboxes(ctx context.Context) error {
	_, err := n.cri(ctx, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
		list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return fmt.Errorf("list pod sandboxes: %w", err)
		}
		var errs []string
		for _, sb := range list.Items {
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs = append(errs, fmt.Sprintf("stop %s: %v", sb.Metadata.GetName(), err))
				continue
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs = append(errs, fmt.Sprintf("remove %s: %v", sb.Metadata.GetName(), err))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("pod sandboxes: %s", strings.Join(errs, "; "))
		}
		return nil
	})
	return err
}

// killShims kills the runc shims whose command line contains match (the
// node's containerd socket, say), which outlive their containerd by design
// (they run in their own session so that containerd can be upgraded under
// running containers), and with them their containers.
func killShims(match string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(cmdline), match) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder lazily unmounts every mount point whose path starts with
// prefix, deepest first: what the kubelet (pod volumes) and containerd
// (root filesystems, shm) leave mounted when they are killed.
func unmountUnder(prefix string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], prefix) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}
