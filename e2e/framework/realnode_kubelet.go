//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
	"time"

	v1 "k8s.io/api/core/v1"
)

// kubeletConfig is the node's KubeletConfiguration: cgroupfs, containerd's
// CRI socket, its own pod-log directory, no swap check, the API server
// allowed to read logs (anonymous on the node's address only), and image
// garbage collection off: the images were imported, nothing could pull
// them again.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.IP}}
port: {{.Port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{.HealthzPort}}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://{{.Sock}}
podLogsDir: {{.Dir}}/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
resolvConf: /etc/resolv.conf
serializeImagePulls: false
nodeStatusReportFrequency: 10s
# kube-proxy keeps the Service rules; the kubelet's own iptables chains
# (KUBE-FIREWALL and its canary) would outlive the node on this host.
makeIPTablesUtilChains: false
`))

// AddRealNode starts a real node on a control plane started with
// Options.RealNode: containerd (its images imported from archives),
// kube-proxy and the kubelet, and waits until the node is Ready.
func (c *Cluster) AddRealNode(ctx context.Context, archives []string) (_ *RealNode, err error) {
	if c.real == nil {
		return nil, ErrNoRealNode
	}
	if c.real.SandboxImage == "" {
		return nil, fmt.Errorf("real node: no sandbox (pause) image")
	}
	n := &RealNode{Name: c.real.Name, IP: c.real.IP, Dir: filepath.Join(c.WorkDir, "realnode"), c: c, opts: *c.real}
	c.mu.Lock()
	c.realNodes = append(c.realNodes, n)
	c.mu.Unlock()
	// A run killed before its teardown leaves the previous node's
	// checkpoint and sockets: the kubelet would restore a dead node's
	// device assignments.
	if err := clearDir(KubeletDevicePluginDir); err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		f    func(context.Context) error
	}{
		{"containerd", n.startContainerd},
		{"images", func(ctx context.Context) error {
			for _, a := range archives {
				if err := n.ImportImage(ctx, a); err != nil {
					return err
				}
			}
			return nil
		}},
		// The kubelet first: kube-proxy reads the node's addresses from the
		// Node object and retries (about 30 s) until it exists.
		{"kubelet", n.StartKubelet},
		{"kube-proxy", n.startKubeProxy},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.f(ctx); err != nil {
			return n, fmt.Errorf("real node %s: start %s: %w", n.Name, s.name, err)
		}
		fmt.Fprintf(c.log, "e2e: real node %s: %s up in %s\n", n.Name, s.name, time.Since(t).Round(time.Millisecond))
	}
	return n, nil
}

// clearDir removes what dir holds, creating it if missing.
func clearDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return nil
}

// StartKubelet starts the kubelet (again, after StopKubelet, with the same
// root directory: its checkpoints survive) and waits until the node is
// Ready with a heartbeat newer than the start.
func (n *RealNode) StartKubelet(ctx context.Context) error {
	n.mu.Lock()
	if n.kubeletArgs == nil {
		if err := n.writeKubeletConfig(); err != nil {
			n.mu.Unlock()
			return err
		}
	}
	args := n.kubeletArgs
	n.mu.Unlock()
	start := time.Now()
	p, err := startProcess(n.c.LogDir(), "kubelet", n.opts.Tools.Path(BinKubelet), args, nil)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
	return n.c.poll(ctx, 2*time.Minute, "node "+n.Name+" Ready", func(ctx context.Context) (bool, error) {
		node, err := n.Node(ctx)
		if err != nil {
			return false, err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == v1.NodeReady {
				if cond.Status != v1.ConditionTrue {
					return false, fmt.Errorf("Ready %s: %s", cond.Status, cond.Message)
				}
				return !cond.LastHeartbeatTime.Time.Before(start.Truncate(time.Second)), nil
			}
		}
		return false, nil
	}, p)
}

// StopKubelet stops the kubelet (SIGTERM); its containers keep running,
// as on a node whose kubelet is restarted.
func (n *RealNode) StopKubelet() {
	n.mu.Lock()
	p := n.kubelet
	n.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

func (n *RealNode) writeKubeletConfig() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	dir := filepath.Join(n.Dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(n.Dir, "pod-logs"), 0o755); err != nil {
		return fmt.Errorf("create pod-log directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create kubelet directory: %w", err)
	}
	n.kubeletConf = filepath.Join(n.Dir, "kubelet-config.yaml")
	if err := renderFile(n.kubeletConf, kubeletConfig, map[string]any{"IP": n.IP, "Port": ports[0],
		"HealthzPort": ports[1], "Sock": n.containerdSock, "Dir": n.Dir}); err != nil {
		return err
	}
	labels := make([]string, 0, len(n.opts.Labels))
	for k, v := range n.opts.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	n.kubeletArgs = []string{
		"--config=" + n.kubeletConf,
		"--kubeconfig=" + n.c.Kubeconfig,
		"--root-dir=" + dir,
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--v=2",
	}
	if len(labels) > 0 {
		n.kubeletArgs = append(n.kubeletArgs, "--node-labels="+strings.Join(labels, ","))
	}
	return nil
}

// startKubeProxy runs kube-proxy in iptables mode, so that pods reach the
// API server through the kubernetes Service as in-cluster clients do. It
// is told to leave the host's conntrack and route_localnet settings alone.
func (n *RealNode) startKubeProxy(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	p, err := startProcess(n.c.LogDir(), "kube-proxy", n.opts.Tools.Path(BinKubeProxy), []string{
		"--kubeconfig=" + n.c.Kubeconfig,
		"--hostname-override=" + n.Name,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + PodCIDR,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--healthz-bind-address=127.0.0.1:%d", ports[1]),
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proxy = p
	n.mu.Unlock()
	return n.c.poll(ctx, time.Minute, "kube-proxy's rules for the kubernetes Service", func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "iptables", "-t", "nat", "-S", "KUBE-SERVICES").CombinedOutput()
		return err == nil && strings.Contains(string(out), KubernetesServiceIP+"/32"), nil
	}, p)
}

// processes returns the node's running children, for log tails.
func (n *RealNode) processes() []*Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*Process
	for _, p := range []*Process{n.containerd, n.proxy, n.kubelet} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// stop tears the node down and leaves the machine as it found it: the
// kubelet first (nothing restarts a container), then every pod sandbox
// through CRI (containers killed, networks released), containerd and its
// shims, leftover mounts, kube-proxy's rules, the bridge and the pods'
// cgroups.
func (n *RealNode) stop() {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.stopped = true
	n.mu.Unlock()
	n.StopKubelet()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n.mu.Lock()
	containerd, proxy := n.containerd, n.proxy
	n.mu.Unlock()
	if containerd != nil {
		if gone, _ := containerd.Exited(); !gone {
			if err := n.removeSandboxes(ctx); err != nil {
				fmt.Fprintf(n.c.log, "e2e: real node %s: %v\n", n.Name, err)
			}
		}
		containerd.Stop()
		killShims(n.containerdSock)
	}
	unmountUnder(n.Dir)
	if proxy != nil {
		proxy.Stop()
	}
	removeNodeState()
	_ = clearDir(KubeletDevicePluginDir)
}

// removeNodeState removes what a node leaves on the host beside its
// processes and mounts: kube-proxy's iptables chains, the CNI bridge, the
// kubelet's pod cgroups and the one containerd's shims put themselves in
// (named after the namespace).
func removeNodeState() {
	removeKubeChains()
	_ = exec.Command("ip", "link", "del", CNIBridge).Run()
	removeCgroups("kubepods")
	removeCgroups("k8s.io")
}

// realWorkPrefix starts every real cluster's work directory (a temporary
// directory; StartRealCluster).
const realWorkPrefix = "vshare-real-"

// sweepStale removes what a real node of an earlier run left behind when
// that run was killed before its teardown (SIGKILL, a timeout's os.Exit):
// containerd's shims (and with them their containers) survive their
// containerd, mounts stay, and so do kube-proxy's chains, the bridge, the
// node's address and the pods' cgroups. The caller holds the real-node
// lock, so whatever of this kind exists is stale.
func sweepStale(ip string) {
	prefix := filepath.Join(os.TempDir(), realWorkPrefix)
	killShims(prefix)
	unmountUnder(prefix)
	removeNodeState()
	(&RealNodeOptions{IP: ip}).removeNodeAddress()
}

// removeCgroups removes the named cgroup tree from every cgroup v1
// hierarchy, deepest first (a cgroup is removed with rmdir once empty).
func removeCgroups(name string) {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, root := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

// removeKubeChains removes kube-proxy's iptables chains (KUBE-*) and the
// rules jumping to them from every table, in both the nft and the legacy
// back ends. `kube-proxy --cleanup` does this too but fails on a host
// without ipset and IPVS, as this one is.
func removeKubeChains() {
	for _, cmd := range []string{"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy"} {
		if _, err := exec.LookPath(cmd); err != nil {
			continue
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.Command(cmd, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, line := range strings.Split(string(out), "\n") {
				f := ruleFields(line)
				switch {
				case len(f) >= 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
					chains = append(chains, f[1])
				case len(f) >= 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") && strings.Contains(line, "-j KUBE-"):
					_ = exec.Command(cmd, append([]string{"-w", "-t", table, "-D"}, f[1:]...)...).Run()
				}
			}
			for _, c := range chains {
				_ = exec.Command(cmd, "-w", "-t", table, "-F", c).Run()
			}
			for _, c := range chains {
				_ = exec.Command(cmd, "-w", "-t", table, "-X", c).Run()
			}
		}
	}
}

// ruleFields splits a rule as `iptables -S` prints it into arguments: words
// separated by spaces, a double-quoted word (a comment) kept whole without
// its quotes.
func ruleFields(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && quoted && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			quoted, inWord = !quoted, true
		case ch == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
