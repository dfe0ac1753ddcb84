package deviceshare

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// lastPlugin makes the cluster keep each session's plugin, for a test to
// read its session state.
func lastPlugin(c *cluster) **plugin {
	last := new(*plugin)
	framework.RegisterPluginBuilder(PluginName, func(args framework.Arguments) framework.Plugin {
		p := c.st.newPlugin(args)
		*last = p
		return p
	})
	return last
}

// withCPU gives the pod's container a CPU request of q.
func withCPU(p *v1.Pod, q string) *v1.Pod {
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(q)
	return p
}

// TestTasksOfOneRequestKeyShareOnePreparedRequest checks that the session
// prepares one request per request key, not per task (issue 36: 10,000
// pending pods held 10,000 prepared requests), and that sharing it changes
// nothing: each task is allocated as if prepared alone, and allocating one
// leaves the prepared request of the others as a fresh Prepare gives it.
func TestTasksOfOneRequestKeyShareOnePreparedRequest(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000}, vcard{"GPU-1", "", 8000})}, nil)
	last := lastPlugin(c)
	pods := map[string]*v1.Pod{
		"a": vgpuPod("a", "pg1", 1, 3000, 25),
		"b": vgpuPod("b", "pg1", 1, 3000, 25),
		// Same cards, more CPU: the binpack policy does not read the
		// host's share, so the key and the prepared request are a's.
		"c": withCPU(vgpuPod("c", "pg1", 1, 3000, 25), "2"),
		"d": vgpuPod("d", "pg1", 1, 2000, 25),
	}
	c.addJob(podGroup("pg1", 4), pods["a"], pods["b"], pods["c"], pods["d"])
	type seen struct {
		req  *taskRequest
		prep device.Prepared
	}
	got := map[string]seen{}
	var fresh map[string]device.Prepared
	c.session(func(*framework.Session) {
		s := (*last).sess
		fresh = map[string]device.Prepared{}
		for name, p := range pods {
			r := s.requests[vcapi.TaskID(p.UID)]
			if r == nil || len(r.prepared) != 1 {
				t.Fatalf("%s: request %+v, want one prepared request", name, r)
			}
			got[name] = seen{req: r, prep: r.prepared[0]}
			f, err := s.backends[r.backends[0]].(device.Preparer).Prepare(p, s.args.SchedulePolicy)
			if err != nil {
				t.Fatalf("%s: Prepare: %v", name, err)
			}
			fresh[name] = f
		}
		if n := len(s.allocs); n != 4 {
			t.Errorf("%d allocations in the session, want 4 (the shared request must not change the outcome)", n)
		}
	})
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}} {
		x, y := got[pair[0]], got[pair[1]]
		if x.req != y.req || x.prep != y.prep {
			t.Errorf("%s and %s ask alike but hold their own requests (%p, %p) or prepared requests", pair[0], pair[1], x.req, y.req)
		}
	}
	if got["a"].req == got["d"].req || got["a"].prep == got["d"].prep {
		t.Errorf("a and d ask for different memory but share a request")
	}
	// After four allocations, every prepared request is still what
	// Prepare gives for a pod of its key. Which pod of a, b and c the
	// session opened first, and so whose host share the shared request
	// carries (binpack does not read it), follows the session's order, so
	// any of the key's fresh requests will do; allocating must have changed
	// none of it.
	keyOf := map[string][]string{"a": {"a", "b", "c"}, "b": {"a", "b", "c"}, "c": {"a", "b", "c"}, "d": {"d"}}
	for _, name := range []string{"a", "b", "c", "d"} {
		same := false
		for _, k := range keyOf[name] {
			same = same || reflect.DeepEqual(got[name].prep, fresh[k])
		}
		if !same {
			t.Errorf("%s: prepared request %+v after allocating, want it as Prepare gives it for one of %v", name, got[name].prep, keyOf[name])
		}
	}
	binds := c.waitBinds(4)
	mem, perCardMiB := map[string]string{}, map[string]int{}
	for key, card := range vgpuCards(binds) {
		ids := binds[testNamespace+"/"+key].Annotations[vgpuproto.AnnotationIDs]
		f := strings.Split(strings.TrimSuffix(ids, ":"), ",")
		mem[key] = f[len(f)-2]
		mib, err := strconv.Atoi(mem[key])
		if err != nil {
			t.Fatalf("%s: memory in %q: %v", key, ids, err)
		}
		perCardMiB[card] += mib
	}
	if diff := cmp.Diff(map[string]string{"a": "3000", "b": "3000", "c": "3000", "d": "2000"}, mem); diff != "" {
		t.Errorf("memory per bound pod (-want +got):\n%s", diff)
	}
	for card, mib := range perCardMiB {
		if mib > 8000 {
			t.Errorf("card %s holds %d MiB of its 8000", card, mib)
		}
	}
}

// TestSharedRequestQuotaAskIsTheTasksOwn checks that the quota ask, the
// one per-pod part of a request, is set on a copy: tasks of one key in
// namespaces of different limits keep their own asks and still share the
// prepared request.
func TestSharedRequestQuotaAskIsTheTasksOwn(t *testing.T) {
	c := quotaCluster(t, resourceQuota("team-a", "q", "limits.volcano.sh/vgpu-memory", "100000"))
	last := lastPlugin(c)
	a := inNamespace("team-a", vgpuPod("a", "pga", 1, 3000, 25))
	b := inNamespace("team-b", vgpuPod("b", "pgb", 1, 3000, 25))
	c.addJob(nsPodGroup("team-a", "pga", 1), a)
	c.addJob(nsPodGroup("team-b", "pgb", 1), b)
	c.session(func(*framework.Session) {
		s := (*last).sess
		ra, rb := s.requests[vcapi.TaskID(a.UID)], s.requests[vcapi.TaskID(b.UID)]
		if ra == nil || rb == nil {
			t.Fatalf("requests %v, %v: want both", ra, rb)
		}
		if ra == rb || ra.quota == nil || rb.quota != nil {
			t.Errorf("team-a's request %p (quota %+v), team-b's %p (quota %+v): want two, only team-a's with an ask", ra, ra.quota, rb, rb.quota)
		}
		if ra.prepared[0] != rb.prepared[0] || ra.results != rb.results {
			t.Errorf("tasks of one key prepared twice or keep two result tables")
		}
	})
	c.waitBinds(2)
}
