//go:build vsharetest

package bind

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

func TestParseCrashHook(t *testing.T) {
	for _, tc := range []struct {
		in     string
		at     int64
		atCall bool
		err    bool
	}{
		{in: ""}, {in: "3", at: 3}, {in: "call:1", at: 1, atCall: true},
		{in: "0", err: true}, {in: "-1", err: true}, {in: "x", err: true}, {in: "call:", err: true}, {in: "call:0", err: true}, {in: "burst:1", err: true}, {in: "bind:2", err: true},
	} {
		h, err := parseCrashHook(tc.in)
		switch {
		case tc.err:
			if err == nil || !strings.Contains(err.Error(), EnvTestCrashAtBind) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("parseCrashHook(%q) = %v, want an error naming %s and the value", tc.in, err, EnvTestCrashAtBind)
			}
		case err != nil:
			t.Errorf("parseCrashHook(%q): %v", tc.in, err)
		case tc.in == "" && h != nil:
			t.Errorf("parseCrashHook(\"\") = %+v, want nil (not armed)", h)
		case tc.in != "" && (h == nil || h.at != tc.at || h.atCall != tc.atCall):
			t.Errorf("parseCrashHook(%q) = %+v, want at %d atCall %t", tc.in, h, tc.at, tc.atCall)
		}
	}
}

// crashBinder returns a binder armed with value whose exit records the
// number of bindings the API server had seen when it was called, instead of
// exiting, and whose halt counts the binds it would have stopped in
// halts; and a client whose pods a, b, c can be bound.
func crashBinder(t *testing.T, value string) (*Binder, *fake.Clientset, *[]int64, *atomic.Int64) {
	b, client, exits, bound, _ := crashBinderHalts(t, value)
	return b, client, exits, bound
}

func crashBinderHalts(t *testing.T, value string) (*Binder, *fake.Clientset, *[]int64, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	h, err := parseCrashHook(value)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewSimpleClientset(phasePod("a", ""), phasePod("b", ""), phasePod("c", ""))
	var bound atomic.Int64
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "binding" {
			bound.Add(1)
			return true, nil, nil
		}
		return false, nil, nil
	})
	var mu sync.Mutex
	var exits []int64
	h.exit = func(code int) {
		if code != 2 {
			t.Errorf("exit code %d, want 2", code)
		}
		mu.Lock()
		exits = append(exits, bound.Load())
		mu.Unlock()
	}
	var halts atomic.Int64
	h.halt = func() { halts.Add(1) }
	binder := New(Options{})
	binder.crash = h
	return binder, client, &exits, &bound, &halts
}

func crashTasks(names, nodes string) []*vcapi.TaskInfo {
	var tasks []*vcapi.TaskInfo
	ns := strings.Split(nodes, ",")
	for i, name := range strings.Split(names, ",") {
		task := vcapi.NewTaskInfo(phasePod(name, ""))
		task.NodeName = ns[i]
		tasks = append(tasks, task)
	}
	return tasks
}

// "N": the process exits right before its N-th bind request (one node's
// binds run in order, so exactly N-1 bindings were sent by then).
func TestCrashHookBeforeNthBind(t *testing.T) {
	b, client, exits, bound := crashBinder(t, "2")
	b.Bind(client, crashTasks("a,b,c", "n1,n1,n1"))
	if len(*exits) != 1 || (*exits)[0] != 1 {
		t.Errorf("exits with bindings seen %v, want one exit with exactly 1 binding sent before it", *exits)
	}
	if bound.Load() != 3 {
		t.Errorf("%d bindings (the test's exit returns), want 3", bound.Load())
	}
}

// "call:N": the process exits when the binder gets its N-th Bind call,
// before any of that call's bindings; empty calls do not count.
func TestCrashHookAtNthCall(t *testing.T) {
	b, client, exits, _ := crashBinder(t, "call:2")
	b.Bind(client, nil)
	b.Bind(client, crashTasks("a", "n1"))
	if len(*exits) != 0 {
		t.Fatalf("exit at the first non-empty call: %v", *exits)
	}
	b.Bind(client, crashTasks("b,c", "n1,n2"))
	if len(*exits) != 1 || (*exits)[0] != 1 {
		t.Errorf("exits with bindings seen %v, want one exit after the first call's binding and before the second's", *exits)
	}
}

// Past the crash point no bind goes out while the crashing goroutine is
// on its way to exit: with call:1, a second Bind call that came after the
// first (on its own goroutine in Volcano) halts before its binding; with
// "2", the third bind request does.
func TestCrashHookHaltsBindsPastTheCrash(t *testing.T) {
	h, err := parseCrashHook("call:1")
	if err != nil {
		t.Fatal(err)
	}
	var halted, exited int
	h.exit = func(int) { exited++ }
	h.halt = func() { halted++ }
	first, second := crashTasks("a", "n1"), crashTasks("b", "n2")
	h.beforeCall(first) // call 1: crashes (the test's exit returns)
	h.beforeCall(second)
	h.beforeBind(second[0])
	if exited != 1 || halted != 1 {
		t.Errorf("call:1: %d exits and %d halts, want the first call's exit and the second call's bind halted", exited, halted)
	}

	b, client, exits, bound, halts := crashBinderHalts(t, "2")
	b.Bind(client, crashTasks("a,b,c", "n1,n1,n1"))
	if len(*exits) != 1 || halts.Load() != 1 || bound.Load() != 3 {
		t.Errorf("\"2\": exits %v, %d halts, %d bindings; want one exit, the third request halted (the test's halt returns)", *exits, halts.Load(), bound.Load())
	}
}

// Unarmed (the variable unset), the binder has no hook and a nil hook does
// nothing.
func TestCrashHookInertUnlessSet(t *testing.T) {
	t.Setenv(EnvTestCrashAtBind, "")
	binder := New(Options{})
	if binder.crash != nil {
		t.Fatalf("hook armed with %s unset: %+v", EnvTestCrashAtBind, binder.crash)
	}
	var h *crashHook
	h.beforeCall(crashTasks("a", "n1"))
	h.afterCall(crashTasks("a", "n1"))
	h.beforeBind(crashTasks("a", "n1")[0])
	h.afterBind()
}
