//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// quotaLimits are the test's namespace quotas: hard limits by namespace and
// resource ("memory" MiB or "cores"), summed over cards.
var quotaLimits = map[string]map[string]int64{
	"quota-a": {"memory": 40000},
	"quota-b": {"memory": 100000, "cores": 150},
	"quota-c": {"memory": 24000},
}

// TestQuotaNamespacesConcurrentJobsAcrossRestart: three namespaces with
// ResourceQuotas on limits.volcano.sh/vgpu-memory (memory times cards) and
// limits.volcano.sh/vgpu-cores get concurrent gang Jobs worth several times
// their quota; the scheduler is killed as soon as a pod is bound and
// started again, later stopped while a running Job leaves and another
// arrives. A watch of the API server's pods sums, on every change, what
// each namespace's bound pods hold according to their vgpu-ids-new
// annotations (decoded here, not by the code under test): no namespace may
// ever pass its quota, the freed quota must be taken again after the
// restart, and the Jobs left waiting must say which quota keeps them.
func TestQuotaNamespacesConcurrentJobsAcrossRestart(t *testing.T) {
	ctx := setup(t, "quota-a", 8*time.Minute)
	for ns, limits := range quotaLimits {
		if err := cluster.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		hard := v1.ResourceList{}
		for res, v := range limits {
			hard[v1.ResourceName("limits.volcano.sh/vgpu-"+res)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
		rq := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu"}, Spec: v1.ResourceQuotaSpec{Hard: hard}}
		if _, err := cluster.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the API server refused ResourceQuota %s/gpu with %v: %v", ns, hard, err)
		}
		t.Cleanup(func() {
			_ = cluster.Kube.CoreV1().ResourceQuotas(ns).Delete(context.Background(), "gpu", metav1.DeleteOptions{})
		})
	}
	w := watchQuotaUse(ctx, t)

	// quota-a: gangs of 2 pods x 2 cards x 5000 MiB = 20000: two of five run.
	// quota-b: gangs of 2 pods x 1 card x 40 cores = 80: one of four runs; a
	// second would fit in part (120 of 150 cores), which must not be bound.
	// quota-c: gangs of 2 x 10000 MiB and pods of 25 % of a 40960 MiB card
	// (10240 MiB, resolved on the card): their sum stays within 24000.
	var jobs []*batchv1alpha1.Job
	for i := range 5 {
		jobs = append(jobs, framework.VGPUJob("quota-a", fmt.Sprintf("a%d", i), framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 2, MemoryMiB: 5000}))
	}
	for i := range 4 {
		jobs = append(jobs, framework.VGPUJob("quota-b", fmt.Sprintf("b%d", i), framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 1, MemoryMiB: 2000, Cores: 40}))
	}
	for i := range 2 {
		jobs = append(jobs, framework.VGPUJob("quota-c", fmt.Sprintf("c%d", i), framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 1, MemoryMiB: 10000}))
		jobs = append(jobs, framework.VGPUJob("quota-c", fmt.Sprintf("p%d", i), framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1,
			Limits: v1.ResourceList{"volcano.sh/vgpu-memory-percentage": resource.MustParse("25")}}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), j.Namespace, j.Name) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- cluster.CreateJob(ctx, j)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	err := cluster.Poll(ctx, time.Minute, "a quota pod bound", func(context.Context) (bool, error) {
		return w.boundPods() > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster.KillScheduler()
	t.Logf("scheduler killed with %d pods bound; starting a new one", w.boundPods())
	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	waitQuotaSteady(ctx, t, w)
	checkQuotaReasons(ctx, t, w)

	// A running Job of quota-a leaves and another arrives while no
	// scheduler runs: the next one counts from the pods alone, takes the
	// freed quota and no more.
	cluster.StopScheduler()
	running := w.runningJobs("quota-a")
	if len(running) == 0 {
		t.Fatalf("quota-a runs no job; held %v", w.held())
	}
	if err := cluster.DeleteJob(ctx, "quota-a", running[0]); err != nil {
		t.Fatal(err)
	}
	freed := w.held()["quota-a"]["memory"]
	late := framework.VGPUJob("quota-a", "a5", framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 2, MemoryMiB: 5000})
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), late.Namespace, late.Name) })
	if err := cluster.CreateJob(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, time.Minute, "quota-a's freed quota taken again", func(context.Context) (bool, error) {
		h := w.held()["quota-a"]["memory"]
		return h > freed, fmt.Errorf("quota-a holds %d MiB, %d after the deletion", h, freed)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitQuotaSteady(ctx, t, w)
	checkQuotaReasons(ctx, t, w)
	w.stop()
	for _, v := range w.violations() {
		t.Error(v)
	}
	t.Logf("most held at any time: %v", w.peaks())
}

// waitQuotaSteady waits until every quota namespace has a bound pod and
// then until what they hold has not changed for three seconds (fifteen of
// the scheduler's 200 ms sessions).
func waitQuotaSteady(ctx context.Context, t *testing.T, w *quotaWatch) {
	t.Helper()
	err := cluster.Poll(ctx, 2*time.Minute, "a bound pod in every quota namespace", func(context.Context) (bool, error) {
		for ns := range quotaLimits {
			if w.boundIn(ns) == 0 {
				return false, fmt.Errorf("%s has no bound pod; held %v", ns, w.held())
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(w.held())
	err = cluster.Poll(ctx, 2*time.Minute, "quota use steady for 3 s", func(ctx context.Context) (bool, error) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(3 * time.Second):
		}
		after := fmt.Sprint(w.held())
		same := after == before
		before = after
		return same, fmt.Errorf("held %s", after)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkQuotaReasons checks that every Job with no bound pod waits with a
// reason naming its namespace's quota.
func checkQuotaReasons(ctx context.Context, t *testing.T, w *quotaWatch) {
	t.Helper()
	for ns := range quotaLimits {
		w.runningJobs(ns) // logs a gang bound in part
		for _, job := range w.waitingJobs(ns) {
			err := cluster.Poll(ctx, 30*time.Second, "job "+ns+"/"+job+" waiting for its quota", func(ctx context.Context) (bool, error) {
				pg, pod := cluster.UnschedulableMessages(ctx, ns, job)
				want := "namespace quota exceeded: resourcequota " + ns + "/gpu limits.volcano.sh/vgpu-"
				return strings.Contains(pg, want) || strings.Contains(pod, want), fmt.Errorf("podgroup %q, pod %q", pg, pod)
			})
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// quotaWatch follows the quota namespaces' pods through an informer and
// checks the limits on every change.
type quotaWatch struct {
	t      *testing.T
	store  cache.Store
	cancel context.CancelFunc

	mu    sync.Mutex
	viols []string
	peak  map[string]map[string]int64
}

func watchQuotaUse(ctx context.Context, t *testing.T) *quotaWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(cluster.Kube, 0)
	inf := f.Core().V1().Pods().Informer()
	w := &quotaWatch{t: t, store: inf.GetStore(), cancel: cancel, peak: map[string]map[string]int64{}}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.check() },
		UpdateFunc: func(any, any) { w.check() },
		DeleteFunc: func(any) { w.check() },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	t.Cleanup(cancel)
	return w
}

func (w *quotaWatch) stop() { w.cancel() }

// quotaPods returns the quota namespaces' pods in the store.
func (w *quotaWatch) quotaPods() []*v1.Pod {
	var out []*v1.Pod
	for _, o := range w.store.List() {
		p := o.(*v1.Pod)
		if _, ok := quotaLimits[p.Namespace]; ok {
			out = append(out, p)
		}
	}
	return out
}

// holds reports whether the pod holds its cards: bound, not terminated.
func holds(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// held sums, per namespace, memory and cores over the cards of every
// holding pod, from volcano.sh/vgpu-ids-new: containers separated by
// ";", cards by ":", a card "UUID,TYPE,MEMORY_MIB,CORES".
func (w *quotaWatch) held() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for _, p := range w.quotaPods() {
		if !holds(p) {
			continue
		}
		if out[p.Namespace] == nil {
			out[p.Namespace] = map[string]int64{}
		}
		for _, ctr := range strings.Split(p.Annotations["volcano.sh/vgpu-ids-new"], ";") {
			for _, card := range strings.Split(ctr, ":") {
				f := strings.Split(card, ",")
				if len(f) != 4 {
					continue
				}
				mem, err1 := strconv.ParseInt(f[2], 10, 64)
				cores, err2 := strconv.ParseInt(f[3], 10, 64)
				if err1 != nil || err2 != nil {
					w.flag(fmt.Sprintf("pod %s/%s: card %q does not decode", p.Namespace, p.Name, card))
					continue
				}
				out[p.Namespace]["memory"] += mem
				out[p.Namespace]["cores"] += cores
			}
		}
	}
	return out
}

func (w *quotaWatch) check() {
	held := w.held()
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, limits := range quotaLimits {
		if w.peak[ns] == nil {
			w.peak[ns] = map[string]int64{}
		}
		for res, hard := range limits {
			if h := held[ns][res]; h > hard {
				w.viols = append(w.viols, fmt.Sprintf("namespace %s holds %d of %s, above its quota %d", ns, h, res, hard))
			}
			w.peak[ns][res] = max(w.peak[ns][res], held[ns][res])
		}
	}
}

func (w *quotaWatch) flag(v string) {
	w.mu.Lock()
	w.viols = append(w.viols, v)
	w.mu.Unlock()
}

func (w *quotaWatch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.viols...)
}

func (w *quotaWatch) peaks() map[string]map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

func (w *quotaWatch) boundPods() int {
	n := 0
	for _, p := range w.quotaPods() {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func (w *quotaWatch) boundIn(ns string) int {
	n := 0
	for _, p := range w.quotaPods() {
		if p.Namespace == ns && holds(p) {
			n++
		}
	}
	return n
}

// jobPods counts, per Job of ns, its pods and its bound pods.
func (w *quotaWatch) jobPods(ns string) map[string][2]int {
	out := map[string][2]int{}
	for _, p := range w.quotaPods() {
		if p.Namespace != ns || p.DeletionTimestamp != nil {
			continue
		}
		c := out[p.Labels[framework.JobNameLabel]]
		c[0]++
		if p.Spec.NodeName != "" {
			c[1]++
		}
		out[p.Labels[framework.JobNameLabel]] = c
	}
	return out
}

// runningJobs returns the Jobs of ns whose every pod is bound.
func (w *quotaWatch) runningJobs(ns string) []string {
	var out []string
	for job, c := range w.jobPods(ns) {
		switch {
		case c[1] == c[0]:
			out = append(out, job)
		case c[1] > 0:
			// Only a scheduler killed between a gang's binds leaves one
			// bound in part (binds are one API call per pod); its other
			// pods then wait for quota like any other.
			w.t.Logf("job %s/%s has %d of %d pods bound (a bind cut short by the kill)", ns, job, c[1], c[0])
		}
	}
	sort.Strings(out)
	return out
}

// waitingJobs returns the Jobs of ns with no bound pod.
func (w *quotaWatch) waitingJobs(ns string) []string {
	var out []string
	for job, c := range w.jobPods(ns) {
		if c[1] == 0 {
			out = append(out, job)
		}
	}
	sort.Strings(out)
	return out
}
