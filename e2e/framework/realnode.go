//go:build e2e

package framework

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A real node (issue 32): the kubelet v1.30.2 with containerd (Debian's)
// and the CNI bridge, beside kube-proxy, kube-controller-manager and
// kube-scheduler, against the harness's API server. Only the GPU and the
// NVIDIA container toolkit are stood in for (RuntimeHandler).
//
// What this machine imposes, each checked by hand first:
//   - the kubelet's device-plugin directory is always
//     /var/lib/kubelet/device-plugins (pluginapi.DevicePluginPath), whatever
//     --root-dir says: one real node per machine at a time (nodeLockPath);
//   - the VM refuses negative OOM scores: containerd's CRI plugin needs
//     restrict_oom_score_adj, or every sandbox fails ("can't get final
//     child's PID");
//   - cgroup v1 with cgroupfs (no systemd);
//   - no dummy network device: the node's address (DefaultNodeIP) is an
//     extra address on lo, which pods reach through the CNI bridge's
//     gateway like any host address.
const (
	// DefaultNodeIP is the real node's address: the kubelet's --node-ip and
	// the API server's bind address.
	DefaultNodeIP = "10.250.0.1"
	// PodCIDR is the CNI bridge's subnet.
	PodCIDR = "10.244.0.0/24"
	// CNIBridge is the bridge the CNI plugin creates for the pods.
	CNIBridge = "vshare-cni0"
	// KubeletDevicePluginDir is the kubelet's fixed device-plugin directory.
	KubeletDevicePluginDir = "/var/lib/kubelet/device-plugins"
	// nodeLockPath is held while a real node runs on the machine; not
	// inside KubeletDevicePluginDir, whose files the kubelet deletes at
	// start.
	nodeLockPath = "/var/lib/kubelet/vshare-e2e-realnode.lock"
	// GPULabel is the label the chart's agent DaemonSet selects nodes by
	// (set by NVIDIA's GPU feature discovery on real clusters).
	GPULabel = "nvidia.com/gpu.present"
)

// RealNodeOptions configure a control plane for a real node (Options.
// RealNode) and the node itself (AddRealNode).
type RealNodeOptions struct {
	// Tools are the Kubernetes node binaries (EnsureNodeTools). Required.
	Tools NodeTools
	// IP is the node's address; empty means DefaultNodeIP.
	IP string
	// Name is the node's name; empty means "real-node-0".
	Name string
	// Labels are the node's labels (--node-labels).
	Labels map[string]string
	// SandboxImage is the pod sandbox (pause) image containerd runs,
	// already imported. Required.
	SandboxImage string
	// Runtime is the container runtime the node runs containers with by
	// default, as the NVIDIA GPU operator configures containerd; nil means
	// plain runc.
	Runtime *RuntimeHandler
	// Kwok also starts kwok, for simulated nodes beside the real one
	// (AddGPUNode; the demo).
	Kwok bool
}

// RuntimeHandler is a containerd runtime handler of the runc v2 shim with
// another runc-compatible binary, as the NVIDIA container toolkit installs
// nvidia-container-runtime.
type RuntimeHandler struct {
	// Name is the handler's name (and a RuntimeClass's handler).
	Name string
	// BinaryName is the runc-compatible executable the shim runs.
	BinaryName string
	// Env is added to containerd's environment, which its shims and their
	// runtime binary inherit (the toolkit's XDG_CONFIG_HOME, say).
	Env []string
}

func (o *RealNodeOptions) defaults() {
	if o.IP == "" {
		o.IP = DefaultNodeIP
	}
	if o.Name == "" {
		o.Name = "real-node-0"
	}
}

// addNodeAddress puts the node's address on lo (Cluster.Stop removes it).
// The caller holds the machine's real-node lock (LockRealNode).
func (o *RealNodeOptions) addNodeAddress(context.Context) error {
	o.defaults()
	out, err := exec.Command("ip", "-o", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip addr show dev lo: %w: %s", err, out)
	}
	if strings.Contains(string(out), " "+o.IP+"/") {
		return nil // a crashed run left it; reuse it
	}
	if out, err := exec.Command("ip", "addr", "add", o.IP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s/32 dev lo (the real node needs root): %w: %s", o.IP, err, out)
	}
	return nil
}

func (o *RealNodeOptions) removeNodeAddress() {
	_ = exec.Command("ip", "addr", "del", o.IP+"/32", "dev", "lo").Run()
}

// LockRealNode takes the machine's real-node lock, waiting for another run
// to finish with it; the returned function releases it.
func LockRealNode(ctx context.Context) (func(), error) {
	if err := RealNodeUnavailable(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(nodeLockPath), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(nodeLockPath), err)
	}
	type res struct {
		unlock func()
		err    error
	}
	ch := make(chan res, 1)
	go func() {
		u, err := lockFile(nodeLockPath)
		ch <- res{u, err}
	}()
	select {
	case r := <-ch:
		return r.unlock, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				r.unlock()
			}
		}()
		return nil, fmt.Errorf("wait for the real-node lock %s (another run holds it): %w", nodeLockPath, ctx.Err())
	}
}

// startKubeControllerManager runs the controllers a real node's workloads
// need: DaemonSets, Deployments and ReplicaSets (the chart), the
// ServiceAccount and root-CA publishers (pods' API credentials), garbage
// collection and node lifecycle.
func (c *Cluster) startKubeControllerManager(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	certs := filepath.Join(c.WorkDir, "certs")
	p, err := c.startTool("kube-controller-manager", BinKubeControllerMgr, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[0]),
		"--cert-dir=" + filepath.Join(c.WorkDir, "kcm-certs"),
		"--root-ca-file=" + clusterCA(certs),
		"--service-account-private-key-file=" + filepath.Join(certs, "sa.key"),
		"--use-service-account-credentials=false",
		"--controllers=*",
		"--v=1",
	})
	if err != nil {
		return err
	}
	// The root-CA publisher's ConfigMap in a namespace is what pods'
	// ServiceAccount volumes need: its arrival says the controllers run.
	return c.poll(ctx, time.Minute, "kube-root-ca.crt in namespace default", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	}, p)
}

// startKubeScheduler runs the default scheduler, which places the chart's
// DaemonSet and Deployment pods.
func (c *Cluster) startKubeScheduler(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	p, err := c.startTool("kube-scheduler", BinKubeScheduler, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[0]),
		"--v=1",
	})
	if err != nil {
		return err
	}
	return c.poll(ctx, time.Minute, "kube-scheduler /healthz", func(ctx context.Context) (bool, error) {
		return httpsOK(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])), nil
	}, p)
}

// startTool starts one of the real node's Kubernetes binaries as a child of
// the control plane.
func (c *Cluster) startTool(name, bin string, args []string) (*Process, error) {
	return c.startPath(name, c.real.Tools.Path(bin), args, nil)
}

// waitServiceAccount waits for a namespace's default ServiceAccount, which
// the controller-manager creates and ServiceAccount admission needs before
// any pod of the namespace is created.
func (c *Cluster) waitServiceAccount(ctx context.Context, namespace string) error {
	return c.Poll(ctx, time.Minute, "ServiceAccount "+namespace+"/default", func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// httpsOK is httpOK over TLS without verifying the server: the component's
// self-signed serving certificate on loopback.
func httpsOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// RealNode is a kubelet with containerd registered with the cluster.
type RealNode struct {
	Name, IP string
	// Dir holds the node's configuration, state and logs' sockets.
	Dir string

	c    *Cluster
	opts RealNodeOptions

	mu                          sync.Mutex
	containerd, kubelet, proxy  *Process
	containerdSock, kubeletConf string
	kubeletArgs                 []string
	stopped                     bool
}

// ErrNoRealNode is returned by AddRealNode on a control plane started
// without Options.RealNode.
var ErrNoRealNode = errors.New("the control plane was not started for a real node (Options.RealNode)")

// Node returns the node object.
func (n *RealNode) Node(ctx context.Context) (*v1.Node, error) {
	return n.c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
}

// CheckpointEntry is one container's devices in the kubelet's device
// manager checkpoint (pkg/kubelet/cm/devicemanager/checkpoint): what the
// kubelet restores after a restart.
type CheckpointEntry struct {
	PodUID, ContainerName, ResourceName string
	// DeviceIDs are the device IDs by NUMA node.
	DeviceIDs map[string][]string
	// AllocResp is the plugin's Allocate answer, as the kubelet kept it
	// (a serialised ContainerAllocateResponse).
	AllocResp []byte
}

// DeviceCheckpoint reads the kubelet's device manager checkpoint,
// kubelet_internal_checkpoint in its device-plugin directory.
func DeviceCheckpoint() ([]CheckpointEntry, error) {
	b, err := os.ReadFile(filepath.Join(KubeletDevicePluginDir, "kubelet_internal_checkpoint"))
	if err != nil {
		return nil, fmt.Errorf("kubelet device checkpoint: %w", err)
	}
	var cp struct {
		Data struct{ PodDeviceEntries []CheckpointEntry }
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("kubelet device checkpoint: %w", err)
	}
	return cp.Data.PodDeviceEntries, nil
}
