//go:build e2e

package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
)

// Options configure Start.
type Options struct {
	// Binaries come from EnsureBinaries. Required.
	Binaries Binaries
	// WorkDir holds logs, data, sockets and configuration; empty means a new
	// temporary directory. Keep it short: unix socket paths live under it.
	WorkDir string
	// SchedulerConf is the volcano-scheduler.conf content; empty means
	// DefaultSchedulerConf.
	SchedulerConf string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Audit makes the API server write an audit log (metadata of every
	// request) that AuditCounts reads.
	Audit bool
	// RealNode makes a control plane a real node's pods can use
	// (realnode.go): the API server on the node's address with a serving
	// certificate of the cluster's CA, ServiceAccount admission on (pods get
	// their token volume), no kwok and no vc-scheduler process (the chart's
	// scheduler runs in a pod). AddRealNode starts the rest.
	RealNode *RealNodeOptions
}

// Cluster is a running local control plane.
type Cluster struct {
	WorkDir    string
	Kubeconfig string
	Config     *rest.Config
	Kube       kubernetes.Interface
	Volcano    vcclient.Interface

	bins      Binaries
	log       io.Writer
	token     string
	apiPort   int
	schedConf string
	audit     bool
	real      *RealNodeOptions
	// schedMetrics is the running scheduler's /metrics URL.
	schedMetrics string
	etcdURL      string
	etcd, apisv  *Process

	mu        sync.Mutex
	procs     []*Process // control-plane children, in start order
	scheduler *Process
	nodes     []*GPUNode
	realNodes []*RealNode
	stopped   bool
}

// Start brings the control plane up: etcd, kube-apiserver (with Volcano's
// CRDs and namespace volcano-system), vc-controller-manager, kwok and
// vc-scheduler. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c := &Cluster{bins: opts.Binaries, log: opts.Log, WorkDir: opts.WorkDir, schedConf: opts.SchedulerConf, audit: opts.Audit, real: opts.RealNode}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.schedConf == "" {
		c.schedConf = DefaultSchedulerConf
	}
	if c.WorkDir == "" {
		if c.WorkDir, err = os.MkdirTemp("", "vshare-e2e-"); err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
	}
	for _, d := range []string{"logs", "etcd", "certs", "nodes"} {
		if err := os.MkdirAll(filepath.Join(c.WorkDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, c.Tails(30))
			c.Stop()
		}
	}()
	type step struct {
		name string
		f    func(context.Context) error
	}
	steps := []step{{"allocation key", c.writeAllocationKey}}
	if c.real != nil {
		steps = append(steps, step{"node address", c.real.addNodeAddress})
	}
	steps = append(steps,
		step{"etcd", c.startEtcd},
		step{"kube-apiserver", c.startAPIServer},
		step{"Volcano CRDs", c.installCRDs},
		step{"vc-controller-manager", c.startControllerManager})
	if c.real != nil {
		steps = append(steps, step{"kube-controller-manager", c.startKubeControllerManager},
			step{"kube-scheduler", c.startKubeScheduler})
		if c.real.Kwok {
			steps = append(steps, step{"kwok", c.startKwok})
		}
	} else {
		steps = append(steps, step{"kwok", c.startKwok}, step{"vc-scheduler", c.StartScheduler})
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.f(ctx); err != nil {
			return nil, fmt.Errorf("start %s: %w", s.name, err)
		}
		fmt.Fprintf(c.log, "e2e: %s up in %s\n", s.name, time.Since(t).Round(time.Millisecond))
	}
	return c, nil
}

// LogDir is where every child's log file is.
func (c *Cluster) LogDir() string { return filepath.Join(c.WorkDir, "logs") }

func (c *Cluster) start(name, bin string, args, env []string) (*Process, error) {
	return c.startPath(name, c.bins.Path(bin), args, env)
}

// startPath starts the executable at path as a child of the control plane.
func (c *Cluster) startPath(name, path string, args, env []string) (*Process, error) {
	p, err := startProcess(c.LogDir(), name, path, args, env)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	c.etcd, err = c.start("etcd", BinEtcd, []string{
		"--data-dir=" + filepath.Join(c.WorkDir, "etcd"),
		"--listen-client-url=" + c.etcdURL,
		fmt.Sprintf("--listen-peer-url=http://127.0.0.1:%d", ports[1]),
	}, nil)
	if err != nil {
		return err
	}
	return c.poll(ctx, time.Minute, "etcd health", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, c.etcdURL+"/health"), nil
	}, c.etcd)
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	c.apiPort = ports[0]
	certs := filepath.Join(c.WorkDir, "certs")
	saKey := filepath.Join(certs, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	c.token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(certs, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(c.token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=" + c.apiHost(),
		"--secure-port=" + strconv.Itoa(c.apiPort),
		"--cert-dir=" + certs,
		"--token-auth-file=" + tokenFile,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
	}
	if c.real == nil {
		// No controller-manager creates default ServiceAccounts: without
		// ServiceAccount admission pods need none. kwok nodes keep their
		// not-ready taint without TaintNodesByCondition off.
		args = append(args, "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	} else {
		// Pods on the real node reach the API server through the kubernetes
		// Service (kube-proxy) with the token and CA their ServiceAccount
		// volume carries: the serving certificate is the cluster CA's, for
		// the node address and the Service's names and address.
		serving, err := writeClusterCerts(certs, c.real.IP)
		if err != nil {
			return err
		}
		args = append(args, "--disable-admission-plugins=TaintNodesByCondition",
			"--tls-cert-file="+serving.Cert, "--tls-private-key-file="+serving.Key,
			"--kubelet-preferred-address-types=InternalIP")
	}
	if c.audit {
		policy := filepath.Join(c.WorkDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return fmt.Errorf("write audit policy: %w", err)
		}
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.AuditLog(),
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0")
	}
	c.apisv, err = c.start("kube-apiserver", BinKubeAPIServer, args, nil)
	if err != nil {
		return err
	}
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	return c.poll(ctx, 2*time.Minute, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	}, c.apisv)
}

// apiHost is the address the API server listens on: loopback, or the real
// node's address, which its pods reach through the kubernetes Service.
func (c *Cluster) apiHost() string {
	if c.real != nil {
		return c.real.IP
	}
	return "127.0.0.1"
}

// writeKubeconfig writes the admin kubeconfig and builds the clients.
func (c *Cluster) writeKubeconfig() error {
	c.Kubeconfig = filepath.Join(c.WorkDir, "kubeconfig")
	trust := "insecure-skip-tls-verify: true"
	if c.real != nil {
		trust = "certificate-authority: " + clusterCA(filepath.Join(c.WorkDir, "certs"))
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://%s
    %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, net.JoinHostPort(c.apiHost(), strconv.Itoa(c.apiPort)), trust, c.token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	// Typed Job templates carry metadata.creationTimestamp: null, which the
	// Volcano CRDs' pruning warns about on every create.
	cfg.WarningHandler = rest.NoWarnings{}
	c.Config = cfg
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	if c.Volcano, err = vcclient.NewForConfig(cfg); err != nil {
		return fmt.Errorf("volcano client: %w", err)
	}
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "volcano-system"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace volcano-system: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	p, err := c.start("vc-controller-manager", BinControllerManager, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--enable-healthz=true",
		fmt.Sprintf("--healthz-address=127.0.0.1:%d", ports[0]),
		"--logtostderr",
	}, []string{"KUBECONFIG=" + c.Kubeconfig}) // its built-in vGPU code builds a client from it
	if err != nil {
		return err
	}
	return c.poll(ctx, time.Minute, "vc-controller-manager /healthz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0])), nil
	}, p)
}

// Stop stops the nodes (in parallel), then the control plane in reverse
// start order. It keeps the work directory (logs); RemoveWorkDir deletes it.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	nodes, procs, real := c.nodes, c.procs, c.realNodes
	c.mu.Unlock()
	// A real node's pods and containers go first, while the API server and
	// the kubelet still run (RealNode.stop).
	for _, n := range real {
		n.stop()
	}
	// Nodes are independent: stop them together (hundreds in benchmarks).
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop() }()
	}
	wg.Wait()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	if c.real != nil {
		c.real.removeNodeAddress()
	}
}

// RemoveWorkDir deletes the work directory; call it after Stop.
func (c *Cluster) RemoveWorkDir() error { return os.RemoveAll(c.WorkDir) }

// Tails returns the last n lines of every child's log, for failure reports.
func (c *Cluster) Tails(n int) string {
	var b strings.Builder
	for _, p := range c.children() {
		fmt.Fprintf(&b, "----- %s (last %d lines of %s) -----\n%s\n", p.Name, n, p.LogPath, p.Tail(n))
	}
	return b.String()
}

// children returns the control-plane children and the node agents.
func (c *Cluster) children() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	procs := append([]*Process(nil), c.procs...)
	for _, node := range c.nodes {
		if node.Agent != nil {
			procs = append(procs, node.Agent)
		}
	}
	for _, node := range c.realNodes {
		procs = append(procs, node.processes()...)
	}
	return procs
}

// poll runs cond every 100ms until it is true, ctx ends, timeout passes or
// one of watch exits (whose log tail is then part of the error).
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error), watch ...*Process) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range watch {
			if gone, why := p.Exited(); gone {
				return false, fmt.Errorf("%s %v:\n%s", p.Name, why, p.Tail(40))
			}
		}
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// Poll waits for cond with a deadline, failing early if a child of the
// harness has died (a scheduler stopped on purpose excepted). Tests use it
// instead of sleeps.
func (c *Cluster) Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	c.mu.Lock()
	var watch []*Process
	for _, p := range c.procs {
		if !strings.HasPrefix(p.Name, "vc-scheduler") || p == c.scheduler {
			watch = append(watch, p)
		}
	}
	for _, n := range c.nodes {
		watch = append(watch, n.Agent)
	}
	c.mu.Unlock()
	return c.poll(ctx, timeout, what, cond, watch...)
}

// stayUp returns an error if p exits within d.
func stayUp(ctx context.Context, p *Process, d time.Duration) error {
	select {
	case <-p.done:
		_, why := p.Exited()
		return fmt.Errorf("%s %v:\n%s", p.Name, why, p.Tail(40))
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// writeRSAKey writes a new 2048-bit RSA private key in PEM.
func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
