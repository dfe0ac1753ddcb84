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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/e2e/runc"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// The node side in real containers (issue 23): what a real node does
// between the agent's Allocate answer and libvgpu's enforcement. A fake GPU
// driver daemon (e2e/fakedriver) stands in for the kernel driver, knows
// processes by their host pids (SO_PEERCRED) and is the ground truth the
// tests judge by; containers are started with runc from the fake kubelet's
// Allocate answers, with libvgpu preloaded through the mounts the agent
// gave, and libvgpu's stub libcuda/libnvidia-ml in the root filesystem in
// remote mode, talking to the daemon over a socket mounted into the
// container (what the NVIDIA container toolkit's driver libraries and
// device nodes are on a real node).
const (
	// ContainerDriverDir is where the driver socket is mounted in containers.
	ContainerDriverDir = "/run/fakegpu"
	// ContainerStubDir holds the stub driver libraries in containers.
	ContainerStubDir = "/usr/lib/fakegpu"
	// ContainerWorkload is the test workload's path in containers.
	ContainerWorkload = "/usr/local/bin/gpuworkload"
	// a100SMs is the A100's streaming multiprocessor count.
	a100SMs = 108
	// stubWaveNS is the time one full wave of blocks takes on the fake devices.
	stubWaveNS = 250000
)

// NodeSide runs containers for one GPU node.
type NodeSide struct {
	Node    *GPUNode
	Driver  *fakedriver.Driver
	Runtime *runc.Runtime

	driverDir, stubDir, workload string

	mu     sync.Mutex
	groups map[int]string // host pid -> container ID, as GroupOf found them
}

// NodeSideArtifacts are the binaries the node side needs, built once.
type NodeSideArtifacts struct {
	Libvgpu  string // libvgpu.so
	StubDir  string // libcuda.so.1, libnvidia-ml.so.1 (the stub)
	Workload string // e2e/testdata/gpuworkload.c compiled
}

// BuildNodeSide builds libvgpu, its stub driver and the test workload.
func BuildNodeSide(ctx context.Context, outDir string) (NodeSideArtifacts, error) {
	root, err := ModuleRoot()
	if err != nil {
		return NodeSideArtifacts{}, err
	}
	lib := filepath.Join(root, "libvgpu")
	mk := exec.CommandContext(ctx, "make", "-s", "-C", lib, "libvgpu.so",
		"build/stub/libcuda.so.1", "build/stub/libnvidia-ml.so.1")
	if out, err := mk.CombinedOutput(); err != nil {
		return NodeSideArtifacts{}, fmt.Errorf("build libvgpu and its stub: %w\n%s", err, out)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return NodeSideArtifacts{}, fmt.Errorf("node-side artifacts: %w", err)
	}
	workload := filepath.Join(outDir, "gpuworkload")
	cc := exec.CommandContext(ctx, "cc", "-O2", "-Wall", "-Wextra", "-o", workload,
		filepath.Join(root, "e2e", "testdata", "gpuworkload.c"), "-ldl")
	if out, err := cc.CombinedOutput(); err != nil {
		return NodeSideArtifacts{}, fmt.Errorf("build the test workload: %w\n%s", err, out)
	}
	return NodeSideArtifacts{Libvgpu: filepath.Join(lib, "libvgpu.so"),
		StubDir: filepath.Join(lib, "build", "stub"), Workload: workload}, nil
}

// registeredCards are the cards the node's agent registered (UUID, memory
// MiB, type), in its NVML order: "UUID,count,memMiB,type,health,mode,numa:"
// each.
// The test binary does not load go-nvml itself (its cgo bindings want
// libnvidia-ml's symbols at load time in this binary).
func (c *Cluster) registeredCards(ctx context.Context, n *GPUNode) ([]fakedriver.Device, error) {
	node, err := c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	cards, err := vgpuproto.DecodeRegister(node.Annotations[vgpuproto.AnnotationRegister])
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	var devs []fakedriver.Device
	for _, c := range cards {
		devs = append(devs, fakedriver.Device{UUID: c.UUID, TotalBytes: uint64(c.MemMiB) << 20, SMs: a100SMs,
			Name: strings.ReplaceAll(c.Type, " ", "-")})
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("node %s: no cards registered", n.Name)
	}
	return devs, nil
}

// StartNodeSide starts node n's fake driver with the cards its agent
// registered (same UUIDs and memory; A100 SMs), installs libvgpu where the
// agent's Allocate mounts it from, and prepares runc.
func (c *Cluster) StartNodeSide(ctx context.Context, n *GPUNode, a NodeSideArtifacts) (*NodeSide, error) {
	devs, err := c.registeredCards(ctx, n)
	if err != nil {
		return nil, err
	}
	ns := &NodeSide{Node: n, driverDir: filepath.Join(n.Dir, "fakegpu"), stubDir: a.StubDir,
		workload: a.Workload, groups: map[int]string{}}
	if err := copyFile(a.Libvgpu, filepath.Join(n.Dir, "libvgpu.so")); err != nil {
		return nil, fmt.Errorf("node %s: install libvgpu: %w", n.Name, err)
	}
	if err := os.MkdirAll(ns.driverDir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: driver directory: %w", n.Name, err)
	}
	cfg := fakedriver.Config{WaveNS: stubWaveNS, GroupOf: ns.groupOf, Devices: devs}
	if ns.Driver, err = fakedriver.Start(filepath.Join(ns.driverDir, "driver.sock"), cfg); err != nil {
		return nil, fmt.Errorf("node %s: fake driver: %w", n.Name, err)
	}
	if ns.Runtime, err = runc.New(filepath.Join(n.Dir, "runc")); err != nil {
		ns.Driver.Close()
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return ns, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// Stop stops the fake driver.
func (ns *NodeSide) Stop() { ns.Driver.Close() }

// groupOf names the container a process runs in: runc puts each container
// in the cgroup named after its ID (/proc/<pid>/cgroup "0::/<id>").
func (ns *NodeSide) groupOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::/"); ok && path != "" {
			ns.mu.Lock()
			ns.groups[pid] = path
			ns.mu.Unlock()
			return path
		}
	}
	return ""
}

// GroupPids are the host pids GroupOf put in container id.
func (ns *NodeSide) GroupPids(id string) []int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var pids []int
	for pid, g := range ns.groups {
		if g == id {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// ContainerSpec turns a fake kubelet's Allocate answer into what the
// kubelet and containerd would run: the answer's environment and mounts,
// the driver's socket and libraries, the workload with args.
func (ns *NodeSide) ContainerSpec(id string, alloc ContainerAllocation, args ...string) runc.Spec {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LD_LIBRARY_PATH=" + ContainerStubDir,
		"VGPU_STUB_DRIVER_SOCKET=" + ContainerDriverDir + "/driver.sock"}
	keys := make([]string, 0, len(alloc.Envs))
	for k := range alloc.Envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+alloc.Envs[k])
	}
	// Device nodes the answer names are passed on (runc leaves out those the
	// host lacks: here the driver is the socket).
	spec := runc.Spec{ID: id, Args: append([]string{ContainerWorkload}, args...), Env: env,
		Copies:  []runc.Mount{{Host: ns.workload, Container: ContainerWorkload}},
		Devices: alloc.Devices}
	// The NVIDIA container toolkit gives a container the driver's libraries
	// and device nodes only for the GPUs in NVIDIA_VISIBLE_DEVICES, which
	// the agent sets in its Allocate answer: no answer, no GPU.
	if alloc.Envs["NVIDIA_VISIBLE_DEVICES"] != "" {
		spec.Copies = append(spec.Copies,
			runc.Mount{Host: filepath.Join(ns.stubDir, "libcuda.so.1"), Container: ContainerStubDir + "/libcuda.so.1"},
			runc.Mount{Host: filepath.Join(ns.stubDir, "libnvidia-ml.so.1"), Container: ContainerStubDir + "/libnvidia-ml.so.1"})
		spec.Mounts = append(spec.Mounts, runc.Mount{Host: ns.driverDir, Container: ContainerDriverDir})
	}
	for _, m := range alloc.Mounts {
		host, ctr, ok := strings.Cut(m, ":")
		if !ok {
			continue
		}
		spec.Mounts = append(spec.Mounts, runc.Mount{Host: host, Container: ctr, ReadOnly: ctr != "/tmp/vgpu"})
		// The libraries libvgpu needs (libm, libc) are in any image; here
		// the root filesystem is the image, so they come from the host.
		if strings.HasSuffix(host, ".so") {
			spec.Files = append(spec.Files, host)
		}
	}
	return spec
}

// RestartAgentWithMetrics restarts the node's agent with its exporter on a
// free loopback port and returns the metrics URL. Restart it with the
// default spec (StartAgent) when done.
func (c *Cluster) RestartAgentWithMetrics(ctx context.Context, n *GPUNode) (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	if err := c.StartAgent(ctx, n, AgentSpec{Args: []string{"--metrics-address=" + addr}}); err != nil {
		return "", err
	}
	return "http://" + addr + "/metrics", nil
}

// Allocation waits until the fake kubelet has the agent's answer for the
// pod's one container: a Running pod (kwok) may be ahead of its admission.
func (ns *NodeSide) Allocation(ctx context.Context, uid types.UID) (ContainerAllocation, error) {
	var ca ContainerAllocation
	err := pollUntil(ctx, 30*time.Second, func() bool {
		alloc, ok := ns.Node.Kubelet.Allocation(uid)
		if ok && len(alloc.Containers) == 1 {
			ca = alloc.Containers[0]
		}
		return ca.Envs != nil
	})
	if err != nil {
		return ca, fmt.Errorf("pod %s: no Allocate answer (attempts %d, errors %q): %w", uid, ca.Attempts, ca.Errors, err)
	}
	return ca, nil
}

// pollUntil polls cond every 20 ms until it holds or timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
