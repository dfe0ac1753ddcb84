//go:build e2e

package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/images"
)

// Images of the real node, built by `make images`' recipe (package images)
// under this registry and tag.
const (
	RealNodeRegistry = "vshare.e2e.local/vshare"
	RealNodeTag      = "e2e"
	// ChartRelease and ChartNamespace are where the harness installs the
	// chart.
	ChartRelease   = "vshare"
	ChartNamespace = "volcano-system"
)

// HealthRecovery is the agent's --health-recovery on the real node: how long
// a card stays unhealthy after an Xid.
const HealthRecovery = 20 * time.Second

// RealClusterOptions configure StartRealCluster.
type RealClusterOptions struct {
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Cards are the fake driver's cards; nil means DefaultRealCards.
	Cards []fakedriver.Device
	// ChartValues are extra `helm install` arguments (--set k=v ...).
	ChartValues []string
	// Simulated makes room for simulated nodes beside the real one
	// (AddGPUNode): kwok runs, the chart's scheduler stays on the real node,
	// and the chart takes the harness's allocation key (a Secret made from
	// it, allocationKey.create=false) so that the simulated nodes' agents,
	// which read it from a file, accept what the scheduler signs.
	Simulated bool
}

// RealCluster is a control plane with one real node, the chart installed
// from images built here, and a fake GPU driver behind the node's device
// nodes.
type RealCluster struct {
	*Cluster
	Node   *RealNode
	Driver *fakedriver.Driver
	// Images are the built images by name (images.All).
	Images map[string]images.Result
	// DriverDir holds the driver's control socket and card nodes.
	DriverDir string
	// Cards are the driver's cards, as configured.
	Cards []fakedriver.Device
	// HostPaths are the chart's host directories for libvgpu.so and the
	// agent's cache (regions, ld.so.preload).
	LibvgpuDir, CacheDir string

	unlock func()
}

// DefaultRealCards are the real node's cards: two A100-PCIE-40GB, each on
// its own NUMA node, joined by an NVLink bridge (A100 PCIe cards take one),
// so that they are peers: tensor-parallel ranks share buffers between them
// by CUDA IPC, which needs peer access between the cards.
func DefaultRealCards() []fakedriver.Device {
	cards := make([]fakedriver.Device, 2)
	for i := range cards {
		cards[i] = fakedriver.Device{
			UUID:       fmt.Sprintf("GPU-a100e2e-0000-0000-0000-%012d", i),
			TotalBytes: 40960 << 20,
			SMs:        a100SMs,
			Name:       "NVIDIA A100-PCIE-40GB",
			NUMANode:   i,
		}
	}
	cards[0].NVLinks = []fakedriver.NVLink{{PeerUUID: cards[1].UUID}}
	cards[1].NVLinks = []fakedriver.NVLink{{PeerUUID: cards[0].UUID}}
	return cards
}

// StartRealCluster takes the machine's real-node lock, builds what is
// missing (the control plane's and the node's binaries, the images, the
// stub driver libraries and the toolkit stand-in), starts the fake driver,
// the control plane and the node, and installs the chart with the images
// imported into containerd. On error everything started is stopped.
func StartRealCluster(ctx context.Context, opts RealClusterOptions) (_ *RealCluster, err error) {
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	unlock, err := LockRealNode(ctx)
	if err != nil {
		return nil, err
	}
	sweepStale(DefaultNodeIP)
	rc := &RealCluster{unlock: unlock}
	defer func() {
		if err != nil {
			if rc.Cluster != nil {
				err = fmt.Errorf("%w\n%s\nwork directory kept: %s", err, rc.Tails(30), rc.WorkDir)
			}
			rc.Stop()
		}
	}()
	bins, err := EnsureBinaries(ctx, log)
	if err != nil {
		return nil, err
	}
	tools, err := EnsureNodeTools(ctx, log)
	if err != nil {
		return nil, err
	}
	helm, err := EnsureHelm(ctx, log)
	if err != nil {
		return nil, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rc.Images, err = images.Build(ctx, images.Options{Root: root, OutDir: filepath.Join(bins.Own, "images"),
		Registry: RealNodeRegistry, Tag: RealNodeTag, Log: log})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "e2e: images ready in %s\n", time.Since(start).Round(time.Second))
	work, err := os.MkdirTemp("", realWorkPrefix)
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	toolkit, err := rc.startDriver(ctx, work, bins, opts.Cards, log)
	if err != nil {
		return nil, err
	}
	real := &RealNodeOptions{Tools: tools, SandboxImage: rc.Images[images.Pause].Reference,
		Labels: map[string]string{GPULabel: "true"}, Runtime: toolkit, Kwok: opts.Simulated}
	rc.Cluster, err = Start(ctx, Options{Binaries: bins, WorkDir: work, Log: log, RealNode: real})
	if err != nil {
		return nil, err
	}
	var archives []string
	for _, name := range images.All() {
		archives = append(archives, rc.Images[name].Archive)
	}
	if rc.Node, err = rc.AddRealNode(ctx, archives); err != nil {
		return nil, err
	}
	values := opts.ChartValues
	if opts.Simulated {
		if err := rc.allocationKeySecret(ctx); err != nil {
			return nil, err
		}
		values = append([]string{"--set", "allocationKey.create=false",
			"--set", "scheduler.nodeSelector.kubernetes\\.io/hostname=" + rc.Node.Name,
			"--set", "webhook.nodeSelector.kubernetes\\.io/hostname=" + rc.Node.Name}, values...)
	}
	if err := rc.installChart(ctx, helm, values); err != nil {
		return nil, err
	}
	return rc, nil
}

// allocationKeySecret creates the chart's allocation key Secret from the
// harness's key file, as docs/install.md tells users who create it
// themselves.
func (rc *RealCluster) allocationKeySecret(ctx context.Context) error {
	key, err := os.ReadFile(rc.AllocationKeyFile())
	if err != nil {
		return fmt.Errorf("read allocation key: %w", err)
	}
	_, err = rc.Kube.CoreV1().Secrets(ChartNamespace).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vshare-allocation-key", Namespace: ChartNamespace},
		Data:       map[string][]byte{"key": key},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the allocation key Secret: %w", err)
	}
	return nil
}

// installChart installs the chart from the checkout with the images built
// here, the host directories under the work directory, and waits for its
// scheduler and agent to be ready and the node's cards to be advertised.
func (rc *RealCluster) installChart(ctx context.Context, helmPath string, extra []string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	rc.LibvgpuDir = filepath.Join(rc.WorkDir, "host", "libvgpu")
	rc.CacheDir = filepath.Join(rc.WorkDir, "host", "vgpu")
	h := Helm{Path: helmPath, Home: filepath.Join(rc.WorkDir, "helm")}
	args := append([]string{
		"--set", "image.registry=" + RealNodeRegistry,
		"--set", "image.tag=" + RealNodeTag,
		"--set", "devicePlugin.hostPaths.libvgpuDir=" + rc.LibvgpuDir,
		"--set", "devicePlugin.hostPaths.cacheDir=" + rc.CacheDir,
		// A card an Xid took away comes back within a test's time (the
		// default is 5 minutes).
		"--set", "devicePlugin.flags.health-recovery=" + HealthRecovery.String(),
		// The admission webhook hides the cards from containers that ask
		// for none (docs/security.md recommends it).
		"--set", "deviceConfig.config.nvidia.overwriteEnv=true",
	}, extra...)
	start := time.Now()
	if out, err := h.Install(ctx, rc.Kubeconfig, filepath.Join(root, "deploy", "helm", "vshare"),
		ChartRelease, ChartNamespace, 3*time.Minute, args...); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	fmt.Fprintf(rc.log, "e2e: chart installed and ready in %s\n", time.Since(start).Round(time.Millisecond))
	return rc.Poll(ctx, time.Minute, "the real node's vGPUs advertised", func(ctx context.Context) (bool, error) {
		node, err := rc.Node.Node(ctx)
		if err != nil {
			return false, err
		}
		q, ok := node.Status.Allocatable["volcano.sh/vgpu-number"]
		return ok && q.Value() > 0, nil
	})
}

// Stop stops the chart's pods with the node, the control plane and the
// driver, and releases the real-node lock.
func (rc *RealCluster) Stop() {
	if rc.Cluster != nil {
		rc.Cluster.Stop()
	}
	if rc.Driver != nil {
		rc.Driver.Close()
	}
	if rc.unlock != nil {
		rc.unlock()
		rc.unlock = nil
	}
}

// ContainerGroup names the container a host process runs in, from its
// cgroup (cgroupfs on cgroup v1: /kubepods/<qos>/pod<uid>/<container id>):
// the fake driver's per-container accounting.
func ContainerGroup(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, path, ok := strings.Cut(line, ":pids:")
		if !ok {
			continue
		}
		if i := strings.LastIndex(path, "/"); i >= 0 && strings.Contains(path, "/pod") {
			return path[i+1:]
		}
	}
	return ""
}

// startDriver builds the stub driver libraries (libvgpu/test/stub) and the
// toolkit stand-in, starts the fake driver with its device nodes in
// <work>/driver, and returns the runtime handler the node's containerd
// runs containers with.
func (rc *RealCluster) startDriver(ctx context.Context, work string, bins Binaries, cards []fakedriver.Device, log io.Writer) (*RuntimeHandler, error) {
	if cards == nil {
		cards = DefaultRealCards()
	}
	stubs := filepath.Join(work, "driver-libs")
	if err := buildDriverLibraries(ctx, log, stubs); err != nil {
		return nil, err
	}
	rc.DriverDir = filepath.Join(work, "driver")
	if err := os.MkdirAll(rc.DriverDir, 0o755); err != nil {
		return nil, fmt.Errorf("driver directory: %w", err)
	}
	rc.Cards = cards
	var err error
	rc.Driver, err = fakedriver.StartDeviceNodes(rc.DriverDir, fakedriver.Config{WaveNS: stubWaveNS, Devices: cards, GroupOf: ContainerGroup})
	if err != nil {
		return nil, err
	}
	return rc.toolkit(ctx, work, bins, stubs)
}

// ContainerPIDs are the host pids of the processes in a container
// (ContainerGroup), by scanning /proc.
func ContainerPIDs(id string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && ContainerGroup(pid) == id {
			pids = append(pids, pid)
		}
	}
	return pids
}

// BundleSpec reads the OCI runtime spec a container was created with: the
// config.json in its bundle, as containerd wrote it and the runtime (the
// toolkit stand-in first) edited it.
func (n *RealNode) BundleSpec(id string) ([]byte, error) {
	p := filepath.Join(n.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("container %s's bundle: %w", id, err)
	}
	return b, nil
}
