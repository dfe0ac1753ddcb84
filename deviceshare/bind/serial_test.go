package bind

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

const testPhaseKey = "example.com/bind-phase"

func pendingPhase(p *v1.Pod) bool { return p.Annotations[testPhaseKey] == "allocating" }

// phasePod is a pod as its bind to n1 left it (boundAs's bind ID) with the
// bind-phase phase.
func phasePod(name, phase string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{testPhaseKey: phase, AnnotationBindID: "bind-" + name},
	}, Spec: v1.PodSpec{NodeName: "n1"}}
}

// setPhase updates the pod's bind-phase as the node agent would.
func setPhase(t *testing.T, client *fake.Clientset, name, phase string) {
	t.Helper()
	ctx := context.Background()
	pod, err := client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[testPhaseKey] = phase
	if _, err := client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podReads returns a channel that receives once per GET of a pod the client
// serves after the first n: a bind reading the pod bound before it, again
// and again while it waits.
func podReads(client *fake.Clientset, n int) <-chan struct{} {
	ch := make(chan struct{}, 1024)
	var mu sync.Mutex
	client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if n--; n < 0 {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		return false, nil, nil
	})
	return ch
}

func boundAs(p *v1.Pod) *agentBoundPod {
	return &agentBoundPod{pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, uid: p.UID,
		bindID: "bind-" + p.Name, pending: pendingPhase}
}

var testKeys = []OrderedKey{{backend: "widget", pending: pendingPhase}}

// A second bind to a node waits until the node agent has served the pod
// bound before it, and no longer; results are counted.
func TestAgentTurnWaitsForTheAgent(t *testing.T) {
	first := phasePod("first", "allocating")
	client := fake.NewSimpleClientset(first)
	// The first read finds it allocating; a second one means the bind
	// waits.
	started := podReads(client, 1)
	turns := newAgentTurns()
	var results []string
	var mu sync.Mutex
	turns.waited = func(r string) { mu.Lock(); results = append(results, r); mu.Unlock() }
	ctx := context.Background()

	held, err := turns.acquire(ctx, client, "n1", "", testKeys)
	if err != nil {
		t.Fatal(err)
	}
	held.release(boundAs(first))

	done := acquireAsync(ctx, turns, client, "n1")
	mustWait(t, started, done, "second bind", "the first pod was still allocating")
	// Other nodes and other device types are not held up meanwhile.
	if h, err := turns.acquire(ctx, client, "n2", "", testKeys); err != nil {
		t.Fatalf("a bind to another node: %v", err)
	} else {
		h.release(nil)
	}
	setPhase(t, client, "first", "success")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second bind after the first was served: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second bind still waiting after the first pod was served")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(results, ",") != "served" {
		t.Errorf("waits counted %v, want [served]", results)
	}
}

// A bind whose predecessor is never served is refused after the wait, names
// the pod it waited for, and holds nothing afterwards; a predecessor that is
// gone does not hold anyone up.
func TestAgentTurnRefusesAfterTheWait(t *testing.T) {
	first := phasePod("first", "allocating")
	client := fake.NewSimpleClientset(first)
	turns := newAgentTurns()
	turns.wait = 300 * time.Millisecond
	var results []string
	turns.waited = func(r string) { results = append(results, r) }
	ctx := context.Background()
	held, err := turns.acquire(ctx, client, "n1", "", testKeys)
	if err != nil {
		t.Fatal(err)
	}
	held.release(boundAs(first))

	_, err = turns.acquire(ctx, client, "n1", "", testKeys)
	if err == nil || !strings.Contains(err.Error(), "ns/first") || !strings.Contains(err.Error(), "still waits for the node agent") {
		t.Fatalf("acquire = %v, want a refusal naming ns/first", err)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	held, err = turns.acquire(ctx, client, "n1", "", testKeys)
	if err != nil {
		t.Fatalf("acquire after the pod waited for was deleted: %v", err)
	}
	held.release(nil)
	if d := time.Since(start); d > turns.wait {
		t.Errorf("acquire after the deletion took %s, want no wait", d)
	}
	if strings.Join(results, ",") != "refused,served" {
		t.Errorf("waits counted %v, want [refused served]", results)
	}
}

// Which states of the pod bound before let the next bind to its node go
// ahead.
func TestAgentBoundPodServed(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		edit func(*v1.Pod)
		want bool
	}{
		{name: "still allocating", edit: func(*v1.Pod) {}, want: false},
		{name: "served by the agent", edit: func(p *v1.Pod) { p.Annotations[testPhaseKey] = "success" }, want: true},
		{name: "refused by the agent", edit: func(p *v1.Pod) { p.Annotations[testPhaseKey] = "failed" }, want: true},
		{name: "replaced by a pod of the same name", edit: func(p *v1.Pod) { p.UID = "uid-other" }, want: true},
		{name: "failed by the kubelet", edit: func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }, want: true},
		// The kubelet may be admitting it: wait until it is gone.
		{name: "being deleted, still allocating", edit: func(p *v1.Pod) { p.DeletionTimestamp = &now }, want: false},
		// An informer's copy from before the bind: none of the bind's
		// annotations, though Volcano has set spec.nodeName on it in
		// place. It must not pass for served.
		{name: "not yet seen bound", edit: func(p *v1.Pod) { delete(p.Annotations, testPhaseKey); delete(p.Annotations, AnnotationBindID) }, want: false},
		{name: "an earlier bind's copy", edit: func(p *v1.Pod) {
			p.Annotations[AnnotationBindID] = "bind-before"
			p.Annotations[testPhaseKey] = "success"
		}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := phasePod("first", "allocating")
			bound := boundAs(p)
			tc.edit(p)
			if got := bound.served(p); got != tc.want {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
}

// Binder.Bind binds a node's pods in order, the second only once the node
// agent has served the first; a pod bound to another node meanwhile is not
// held up.
func TestBinderBindsOneAgentPendingPodPerNode(t *testing.T) {
	a, b, c := phasePod("a", ""), phasePod("b", ""), phasePod("c", "")
	client := fake.NewSimpleClientset(a, b, c)
	var mu sync.Mutex
	var events []string
	record := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	// The API server copies the binding's annotations onto the pod; the
	// fake does not, so the reactor does, and the "agent" serves pod a
	// shortly after its bind.
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		bnd := action.(k8stesting.CreateAction).GetObject().(*v1.Binding)
		record("bind " + bnd.Name + " " + bnd.Target.Name)
		pod, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "ns", bnd.Name)
		if err != nil {
			return true, nil, err
		}
		p := pod.(*v1.Pod).DeepCopy()
		p.Annotations, p.Spec.NodeName = bnd.Annotations, bnd.Target.Name
		if err := client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, "ns"); err != nil {
			return true, nil, err
		}
		if bnd.Name == "a" {
			go func() {
				time.Sleep(200 * time.Millisecond)
				record("served a")
				p := p.DeepCopy() // the agent's merge patch keeps the bind's annotations
				p.Annotations[testPhaseKey] = "success"
				_ = client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, "ns")
			}()
		}
		return true, nil, nil
	})
	binder := New(Options{})
	var tasks []*vcapi.TaskInfo
	for _, x := range []struct {
		pod  *v1.Pod
		node string
	}{{a, "n1"}, {b, "n1"}, {c, "n2"}} {
		task := vcapi.NewTaskInfo(x.pod)
		task.NodeName = x.node
		binder.Decisions.Record(task.Pod.UID, Decision{Node: x.node, Annotations: map[string]string{testPhaseKey: "allocating"}, Ordered: testKeys, Assumed: true})
		tasks = append(tasks, task)
	}
	if errs := binder.Bind(client, tasks); len(errs) != 0 {
		t.Fatalf("Bind errors: %v", errs)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(events, "; ")
	ia, ib, ic, is := strings.Index(got, "bind a n1"), strings.Index(got, "bind b n1"), strings.Index(got, "bind c n2"), strings.Index(got, "served a")
	if ia < 0 || ib < 0 || ic < 0 || is < 0 || ib < is || ia > is || ic > is {
		t.Errorf("events %q: want a bound, c bound without waiting, and b bound only after a was served", got)
	}
}

// With the scheduler's pod informer, a bind waits for the pod bound before
// through it: no GET and no watch of its own, woken by the informer's event
// when the agent serves the pod; a pod the informer no longer has is asked
// of the API server (deleted: no wait); one never served is refused after
// the wait.
func TestAgentTurnWaitsThroughTheInformer(t *testing.T) {
	// The informer first has the pod as it was before its bind: none of
	// the bind's annotations, though Volcano has set spec.nodeName on the
	// cached copy. That must not pass for served.
	first := phasePod("first", "")
	delete(first.Annotations, testPhaseKey)
	delete(first.Annotations, AnnotationBindID)
	client := fake.NewSimpleClientset(first)
	factory := informers.NewSharedInformerFactory(client, 0)
	turns := newAgentTurns()
	w := newPodWatch(factory)
	if w == nil {
		t.Fatal("newPodWatch returned nil for a factory")
	}
	turns.pods.Store(w)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	ownRequests := func() (n int) {
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "pods" && (a.GetVerb() == "get" || a.GetVerb() == "watch") {
				n++
			}
		}
		return n - 1 // the informer's own watch
	}
	ctx := context.Background()
	held, err := turns.acquire(ctx, client, "n1", "", testKeys)
	if err != nil {
		t.Fatal(err)
	}
	held.release(boundAs(first))

	done := acquireAsync(ctx, turns, client, "n1")
	select {
	case err := <-done:
		t.Fatalf("second bind went ahead (err %v) while the informer had the first pod from before its bind", err)
	case <-time.After(200 * time.Millisecond): // it waits: nothing to observe but its not returning
	}
	// The bind reaches the informer: node and bind-phase allocating.
	cur, err := client.CoreV1().Pods("ns").Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Annotations[testPhaseKey], cur.Annotations[AnnotationBindID] = "allocating", "bind-first"
	if _, err := client.CoreV1().Pods("ns").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("second bind went ahead (err %v) while the first pod was still allocating", err)
	case <-time.After(200 * time.Millisecond):
	}
	setPhase(t, client, "first", "success")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second bind after the first was served: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second bind still waiting after the informer showed the first pod served")
	}
	if n := ownRequests(); n != 2 { // the test's GET above and setPhase's
		t.Errorf("the wait made %d GETs or watches of pods, want none", n-2)
	}

	// Never served: refused after the wait, naming the pod.
	second := phasePod("second", "allocating")
	if _, err := client.CoreV1().Pods("ns").Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, ok := w.get(types.NamespacedName{Namespace: "ns", Name: "second"})
		return ok, nil
	}); err != nil {
		t.Fatal("the informer never showed the second pod")
	}
	turns.wait = 200 * time.Millisecond
	held, err = turns.acquire(ctx, client, "n2", "", testKeys)
	if err != nil {
		t.Fatal(err)
	}
	held.release(boundAs(second))
	if _, err := turns.acquire(ctx, client, "n2", "", testKeys); err == nil || !strings.Contains(err.Error(), "ns/second") {
		t.Fatalf("acquire = %v, want a refusal naming ns/second", err)
	}
	// Deleted: gone from the informer, the API server says so, no wait.
	if err := client.CoreV1().Pods("ns").Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, ok := w.get(types.NamespacedName{Namespace: "ns", Name: "second"})
		return !ok, nil
	}); err != nil {
		t.Fatal("the informer still shows the deleted pod")
	}
	held, err = turns.acquire(ctx, client, "n2", "", testKeys)
	if err != nil {
		t.Fatalf("acquire after the pod waited for was deleted: %v", err)
	}
	held.release(nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waiters) != 0 {
		t.Errorf("waiters left behind: %v", w.waiters)
	}
}

// mustWait fails the test unless the acquire whose result done carries
// is seen waiting (a read of the pod it waits for arrives on reads) before
// it returns.
func mustWait(t *testing.T, reads <-chan struct{}, done <-chan error, what, while string) {
	t.Helper()
	select {
	case <-reads:
	case err := <-done:
		t.Fatalf("%s went ahead (err %v) while %s", what, err, while)
	case <-time.After(5 * time.Second):
		t.Fatalf("%s neither waited nor returned", what)
	}
}

// acquireAsync takes node's turns on another goroutine, gives them back,
// and sends acquire's error.
func acquireAsync(ctx context.Context, turns *agentTurns, client kubernetes.Interface, node string) <-chan error {
	done := make(chan error, 1)
	go func() {
		h, err := turns.acquire(ctx, client, node, "", testKeys)
		if err == nil {
			h.release(nil)
		}
		done <- err
	}()
	return done
}

// A scheduler that starts (after a crash or a restart in the middle of a
// burst) finds pods bound by its predecessor still pending with their node
// agent: the first bind to such a node waits for them as for a pod it bound
// itself. Served, terminated and other-type pods hold nobody up, and a device
// type is inherited once per process.
func TestAgentTurnInheritsPendingPods(t *testing.T) {
	old := phasePod("old", "allocating") // bound by the previous process
	delete(old.Annotations, AnnotationBindID)
	served := phasePod("served", "success")
	failed := phasePod("failed", "allocating")
	failed.Status.Phase = v1.PodFailed
	other := phasePod("other", "")
	other.Spec.NodeName = "n2"
	client := fake.NewSimpleClientset(old, served, failed, other)
	nodes := map[string]*vcapi.NodeInfo{"n1": {Name: "n1", Tasks: map[vcapi.TaskID]*vcapi.TaskInfo{}},
		"n2": {Name: "n2", Tasks: map[vcapi.TaskID]*vcapi.TaskInfo{}}}
	for _, p := range []*v1.Pod{old, served, failed, other} {
		task := vcapi.NewTaskInfo(p)
		nodes[p.Spec.NodeName].Tasks[task.UID] = task
	}
	turns := newAgentTurns()
	turns.wait = 5 * time.Second
	otherType := OrderedKey{backend: "gadget", pending: func(*v1.Pod) bool { return true }}
	turns.inherit(nodes, testKeys, nil)
	turns.inherit(nodes, testKeys, nil) // a later session: nothing twice
	ctx := context.Background()

	// Another node, another device type: no wait.
	for _, c := range []struct {
		node string
		keys []OrderedKey
	}{{"n2", testKeys}, {"n1", []OrderedKey{otherType}}} {
		h, err := turns.acquire(ctx, client, c.node, "", c.keys)
		if err != nil {
			t.Fatalf("acquire %s %s: %v", c.node, c.keys[0].backend, err)
		}
		h.release(nil)
	}
	reads := podReads(client, 1)
	done := acquireAsync(ctx, turns, client, "n1")
	mustWait(t, reads, done, "first bind to n1", "a pod bound before the restart was allocating there")
	setPhase(t, client, "old", "success")
	if err := <-done; err != nil {
		t.Fatalf("bind after the inherited pod was served: %v", err)
	}
	turns.mu.Lock()
	defer turns.mu.Unlock()
	if n := len(turns.turn("n1\x00widget").waitFor); n != 0 {
		t.Errorf("%d pods still waited for on n1 after all were served", n)
	}
}

// A bind request that failed without an answer may have bound the pod: the
// next bind to the node waits for it when the API server shows it bound by
// that request, goes ahead when it shows the pod unbound, and the pod itself
// is bound again (Volcano retries it) without waiting for itself.
func TestBinderUncertainBind(t *testing.T) {
	type env struct {
		client *fake.Clientset
		bind   func(pod string) error
	}
	setup := func(t *testing.T, applied bool) env {
		a, b := phasePod("a", ""), phasePod("b", "")
		for _, p := range []*v1.Pod{a, b} {
			p.Spec.NodeName = ""
			delete(p.Annotations, AnnotationBindID)
		}
		client := fake.NewSimpleClientset(a, b)
		var mu sync.Mutex
		binds := map[string]int{}
		// The API server's bind: copies the binding's annotations and node
		// onto an unbound pod, refuses a bound one. The first bind of a
		// loses its answer, after (applied) or before reaching the server.
		client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "binding" {
				return false, nil, nil
			}
			bnd := action.(k8stesting.CreateAction).GetObject().(*v1.Binding)
			mu.Lock()
			binds[bnd.Name]++
			lost := bnd.Name == "a" && binds[bnd.Name] == 1
			mu.Unlock()
			if lost && !applied {
				return true, nil, errors.New("http2: client connection lost")
			}
			obj, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "ns", bnd.Name)
			if err != nil {
				return true, nil, err
			}
			p := obj.(*v1.Pod).DeepCopy()
			if p.Spec.NodeName != "" {
				return true, nil, apierrors.NewConflict(v1.Resource("pods/binding"), bnd.Name, errors.New("pod is already assigned to a node"))
			}
			p.Annotations, p.Spec.NodeName = bnd.Annotations, bnd.Target.Name
			if err := client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, "ns"); err != nil {
				return true, nil, err
			}
			if lost {
				return true, nil, errors.New("http2: client connection lost")
			}
			return true, nil, nil
		})
		binder := New(Options{})
		binder.turns.wait = 300 * time.Millisecond
		pods := map[string]*v1.Pod{"a": a, "b": b}
		return env{client: client, bind: func(name string) error {
			task := vcapi.NewTaskInfo(pods[name])
			task.NodeName = "n1"
			binder.Decisions.Record(task.Pod.UID, Decision{Node: "n1", Annotations: map[string]string{testPhaseKey: "allocating"}, Ordered: testKeys, Assumed: true})
			for _, msg := range binder.Bind(client, []*vcapi.TaskInfo{task}) {
				return errors.New(msg)
			}
			return nil
		}}
	}
	lostAnswer := func(t *testing.T, e env) {
		t.Helper()
		if err := e.bind("a"); err == nil || !strings.Contains(err.Error(), "connection lost") {
			t.Fatalf("first bind of a = %v, want the lost connection", err)
		}
	}

	t.Run("bound, answer lost", func(t *testing.T) {
		e := setup(t, true)
		lostAnswer(t, e)
		// Volcano retries a: the API server refuses it (already bound),
		// without a wait for a itself.
		if err := e.bind("a"); err == nil || !strings.Contains(err.Error(), "already assigned") {
			t.Fatalf("retry of a = %v, want the API server's conflict", err)
		}
		if err := e.bind("b"); err == nil || !strings.Contains(err.Error(), "ns/a") {
			t.Fatalf("bind of b = %v, want a refusal naming ns/a, bound by the lost request and still allocating", err)
		}
		setPhase(t, e.client, "a", "success")
		if err := e.bind("b"); err != nil {
			t.Fatalf("bind of b after a was served: %v", err)
		}
	})
	t.Run("not bound, answer lost", func(t *testing.T) {
		e := setup(t, false)
		lostAnswer(t, e)
		if err := e.bind("b"); err != nil {
			t.Fatalf("bind of b after a's request never reached the server: %v", err)
		}
	})
	t.Run("not bound, retried", func(t *testing.T) {
		e := setup(t, false)
		lostAnswer(t, e)
		if err := e.bind("a"); err != nil {
			t.Fatalf("retry of a, not bound before: %v", err)
		}
		if err := e.bind("b"); err == nil || !strings.Contains(err.Error(), "ns/a") {
			t.Fatalf("bind of b = %v, want a refusal naming ns/a, bound by its retry and still allocating", err)
		}
	})
}

// For an agent that tells pods apart by what the kubelet asks
// (device.AgentClasser), a bind waits only for pods pending in one of its
// classes: a pod in class 2 is bound while one in class 1 is pending, a
// pod in classes 1 and 2 (or in every class, as on an upstream agent's
// node) waits for both, and so does an inherited pod's class.
func TestAgentTurnClasses(t *testing.T) {
	one, two := phasePod("one", "allocating"), phasePod("two", "allocating")
	old := phasePod("old", "allocating") // bound by the previous process, class 3
	delete(old.Annotations, AnnotationBindID)
	client := fake.NewSimpleClientset(one, two, old)
	nodes := map[string]*vcapi.NodeInfo{"n1": {Name: "n1", Tasks: map[vcapi.TaskID]*vcapi.TaskInfo{}}}
	task := vcapi.NewTaskInfo(old)
	nodes["n1"].Tasks[task.UID] = task
	turns := newAgentTurns()
	// Nobody serves the pods: a bind that waits is refused at the end of
	// the wait, one that does not returns at once.
	turns.wait = 200 * time.Millisecond
	turns.inherit(nodes, testKeys, func(node, backend string, pod *v1.Pod) []string {
		if node != "n1" || backend != "widget" || pod.Name != "old" {
			t.Errorf("classes asked for %s %s %s", node, backend, pod.Name)
		}
		return []string{"3"}
	})
	in := func(classes ...string) []OrderedKey { return []OrderedKey{testKeys[0].WithClasses(classes)} }
	ctx := context.Background()
	bind := func(p *v1.Pod, keys []OrderedKey) error {
		held, err := turns.acquire(ctx, client, "n1", p.UID, keys)
		if err == nil {
			held.release(boundAs(p))
		}
		return err
	}
	if err := bind(one, in("1")); err != nil {
		t.Fatalf("first pod of class 1: %v", err)
	}
	if err := bind(two, in("2")); err != nil {
		t.Fatalf("a pod of class 2 while one of class 1 is pending: %v", err)
	}
	for _, c := range []struct {
		keys []OrderedKey
		want []string
	}{
		{in("1"), []string{"ns/one"}},
		{in("2"), []string{"ns/two"}},
		{in("3"), []string{"ns/old"}},
		{in("2", "1"), []string{"ns/one"}}, // the turns are taken in name order
		{in("1", "2", "3", "4"), []string{"ns/one"}},
	} {
		err := bind(phasePod("next", ""), c.keys)
		if err == nil {
			t.Errorf("classes %v: bound while %v pending in them", c.keys[0].classes, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("classes %v: %v; want a wait for %s", c.keys[0].classes, err, w)
			}
		}
	}
	if err := bind(phasePod("next", ""), in("4")); err != nil {
		t.Errorf("a pod of class 4, none pending there: %v", err)
	}
	setPhase(t, client, "one", "success")
	if err := bind(phasePod("next2", ""), in("1", "4")); err != nil {
		t.Errorf("classes 1 and 4 after the class 1 pod was served (class 4's was never bound): %v", err)
	}
}

// A pod bound in several classes is waited for, and the wait counted, once.
func TestAgentTurnClassesWaitOnce(t *testing.T) {
	first := phasePod("first", "success")
	client := fake.NewSimpleClientset(first)
	turns := newAgentTurns()
	var results []string
	turns.waited = func(r string) { results = append(results, r) }
	all := []OrderedKey{testKeys[0].WithClasses([]string{"1", "2", "3"})}
	ctx := context.Background()
	held, err := turns.acquire(ctx, client, "n1", first.UID, all)
	if err != nil {
		t.Fatal(err)
	}
	held.release(boundAs(first))
	if held, err = turns.acquire(ctx, client, "n1", "", all); err != nil {
		t.Fatal(err)
	}
	held.release(nil)
	if diff := cmp.Diff([]string{"served"}, results); diff != "" {
		t.Errorf("waits counted (-want +got):\n%s", diff)
	}
}
