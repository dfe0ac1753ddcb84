//go:build e2e

package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultSchedulerConf enables the deviceshare plugin's vGPU backend.
const DefaultSchedulerConf = `actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
`

// SchedulerSpec says which scheduler StartSchedulerWith runs.
type SchedulerSpec struct {
	// Conf is the volcano-scheduler.conf content; empty means the cluster's
	// (Options.SchedulerConf, or DefaultSchedulerConf).
	Conf string
	// Binary is BinScheduler (ours, the default when empty) or
	// BinStockScheduler (Volcano v1.10.0's own, with its built-in
	// deviceshare).
	Binary string
	// Env is added to the scheduler's environment, for example the
	// test-only bind.EnvTestCrashAtBind (deviceshare/bind) (CrashAtBind).
	Env []string
	// Path, when set, is an executable of this project's scheduler built
	// outside the harness (from another commit, or with a change applied,
	// as hack/bench-rules.sh builds one) to run in Binary's place, with
	// our scheduler's flags. It must be an absolute path.
	Path string
}

// StartScheduler (re)starts our vc-scheduler with the cluster's
// configuration.
func (c *Cluster) StartScheduler(ctx context.Context) error {
	return c.StartSchedulerWith(ctx, SchedulerSpec{})
}

// StartSchedulerWith starts the scheduler spec names, after the previous one
// was stopped, and waits for its /healthz and the default queue.
func (c *Cluster) StartSchedulerWith(ctx context.Context, spec SchedulerSpec) error {
	if spec.Conf == "" {
		spec.Conf = c.schedConf
	}
	if spec.Binary == "" || spec.Path != "" {
		spec.Binary = BinScheduler
	}
	path := c.bins.Path(spec.Binary)
	if spec.Path != "" {
		if !filepath.IsAbs(spec.Path) {
			return fmt.Errorf("scheduler executable %q: want an absolute path", spec.Path)
		}
		if _, err := os.Stat(spec.Path); err != nil {
			return fmt.Errorf("scheduler executable: %w", err)
		}
		path = spec.Path
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	c.mu.Lock()
	n := 0
	for _, p := range c.procs {
		if strings.HasPrefix(p.Name, "vc-scheduler") {
			n++
		}
	}
	c.mu.Unlock()
	name := "vc-scheduler"
	if spec.Binary == BinStockScheduler {
		name = "vc-scheduler-stock"
	}
	if n > 0 {
		name = fmt.Sprintf("%s-%d", name, n+1)
	}
	// One configuration file per start, so the logs' command lines name
	// the configuration each scheduler ran with.
	conf := filepath.Join(c.WorkDir, name+".conf")
	if err := os.WriteFile(conf, []byte(spec.Conf), 0o644); err != nil {
		return fmt.Errorf("write scheduler configuration: %w", err)
	}
	args := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--scheduler-conf=" + conf,
		"--schedule-period=200ms",
		fmt.Sprintf("--listen-address=127.0.0.1:%d", ports[0]),
		"--enable-healthz=true",
		"--enable-metrics=true",
		fmt.Sprintf("--healthz-address=127.0.0.1:%d", ports[1]),
		"--logtostderr", "-v=3",
	}
	if spec.Binary == BinScheduler {
		args = append(args, "--allocation-key-file="+c.AllocationKeyFile())
	}
	env := append([]string{"KUBECONFIG=" + c.Kubeconfig}, spec.Env...) // Volcano's vGPU code builds its own client from KUBECONFIG
	p, err := c.startPath(name, path, args, env)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.scheduler = p
	c.schedMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	c.mu.Unlock()
	if err := c.poll(ctx, time.Minute, "vc-scheduler /healthz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1])), nil
	}, p); err != nil {
		return err
	}
	return c.poll(ctx, time.Minute, "queue default", func(ctx context.Context) (bool, error) {
		_, err := c.Volcano.SchedulingV1beta1().Queues().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}, p)
}

// StopScheduler stops the running vc-scheduler (SIGTERM).
func (c *Cluster) StopScheduler() {
	if p := c.takeScheduler(); p != nil {
		p.Stop()
	}
}

// KillScheduler kills the running vc-scheduler with SIGKILL, as a crash would.
func (c *Cluster) KillScheduler() {
	if p := c.takeScheduler(); p != nil {
		p.Kill()
	}
}

func (c *Cluster) takeScheduler() *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.scheduler
	c.scheduler = nil
	return p
}

// SchedulerLogCount counts the lines of the running scheduler's log that
// contain substr, for tests waiting on something only the log shows.
func (c *Cluster) SchedulerLogCount(substr string) (int, error) {
	c.mu.Lock()
	p := c.scheduler
	c.mu.Unlock()
	if p == nil {
		return 0, fmt.Errorf("no scheduler running")
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return 0, fmt.Errorf("read scheduler log: %w", err)
	}
	return strings.Count(string(data), substr), nil
}

// SchedulerMetrics returns the running scheduler's metrics, by family name.
func (c *Cluster) SchedulerMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	c.mu.Lock()
	url := c.schedMetrics
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape scheduler metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape scheduler metrics: %s", resp.Status)
	}
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse scheduler metrics: %w", err)
	}
	return families, nil
}

// Labels returns a metric's labels as a map.
func Labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// SchedulerProcess returns the running scheduler's process (nil if none).
func (c *Cluster) SchedulerProcess() *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scheduler
}
