package deviceshare

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/deviceshare/nodestate"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// preemptConf lists deviceshare in the first tier, beside priority:
// Volcano v1.10 asks the victim functions tier by tier and the first tier
// whose plugins name victims decides, so the plugin must sit in that tier
// for its choice to count. gang's victim functions are off, as they refuse
// every victim of a job at its minimum.
func preemptConf(actions, args string) string { return tieredConf(actions, args, "proportion") }

// tieredConf is preemptConf with the given queue plugin (proportion or
// capacity) in the second tier.
func tieredConf(actions, args, queuePlugin string) string {
	return `
actions: "` + actions + `"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
  - name: conformance
  - name: deviceshare
    arguments:
` + args + `
- plugins:
  - name: predicates
  - name: ` + queuePlugin + `
`
}

// Priority classes of the preemption tests.
const (
	prioLow  = int32(1)
	prioMid  = int32(50)
	prioHigh = int32(1000)
)

// preemptCluster is a cluster with the test priority classes, an evictor
// the test reads, and the plugin of the last session at hand.
type preemptCluster struct {
	*cluster
	evictor *util.FakeEvictor
	last    *plugin
}

func newPreemptCluster(t *testing.T, conf string, nodes []*v1.Node, queues []*schedulingv1beta1.Queue) *preemptCluster {
	t.Helper()
	evictor := util.NewFakeEvictor(100)
	pc := &preemptCluster{cluster: newClusterWith(t, conf, nodes, queues, evictor), evictor: evictor}
	// Keep each session's plugin value, to compare its device view.
	framework.RegisterPluginBuilder(PluginName, func(args framework.Arguments) framework.Plugin {
		p := pc.st.newPlugin(args)
		pc.last = p
		return p
	})
	for name, v := range map[string]int32{"low": prioLow, "mid": prioMid, "high": prioHigh} {
		pc.cache.AddPriorityClass(util.BuildPriorityClass(name, v))
	}
	return pc
}

// withPriority gives the pod a priority (as the admission plugin would
// from its class).
func withPriority(pod *v1.Pod, prio int32) *v1.Pod {
	pod.Spec.Priority = &prio
	return pod
}

// classGroup is a PodGroup of the queue with a priority class.
func classGroup(name, queue, class string, minMember int32) *schedulingv1beta1.PodGroup {
	pg := util.BuildPodGroupWithPrio(name, testNamespace, queue, minMember, nil, schedulingv1beta1.PodGroupInqueue, class)
	return pg
}

// place schedules the pods (each its own job of the class) in one session
// and brings them back Running with their allocation annotations.
func (pc *preemptCluster) place(class, queue string, pods ...*v1.Pod) []*v1.Pod {
	pc.t.Helper()
	for _, p := range pods {
		pg := classGroup("pg-"+p.Name, queue, class, 1)
		p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey] = pg.Name
		pc.addJob(pg, p)
	}
	pc.session(nil)
	pc.waitBinds(len(pods))
	placed := pc.confirmBinds(pods...)
	pc.session(nil) // the ledger accounts them from their annotations
	return placed
}

// submit adds a pending job of the class.
func (pc *preemptCluster) submit(name, queue, class string, minMember int32, pods ...*v1.Pod) {
	pg := classGroup(name, queue, class, minMember)
	for _, p := range pods {
		p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey] = name
	}
	pc.addJob(pg, pods...)
}

// evictions waits until want pods were evicted (or a deadline passes) and
// a short grace period brings no more, and returns them sorted.
func (pc *preemptCluster) evictions(want int) []string {
	pc.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for pc.evictor.Length() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	got := pc.evictor.Evicts()
	sort.Strings(got)
	return got
}

// nodesStatus renders every node's devices in the node state, by node and backend.
func nodesStatus(l *nodestate.Store) map[string]string {
	view, _, _ := l.View()
	out := map[string]string{}
	for node, m := range view {
		for b, dv := range m {
			if dv.Devices != nil {
				out[node+"/"+b] = dv.Devices.GetStatus()
			}
		}
	}
	return out
}

// sessionStatus renders the session view of the plugin's last session.
func (pc *preemptCluster) sessionStatus() map[string]string {
	out := map[string]string{}
	s := pc.last.sess
	for node, sn := range s.nodes {
		for i, d := range sn.devices {
			if d != nil && d.invErr == nil {
				out[node+"/"+s.backends[i].Name()] = d.read().GetStatus()
			}
		}
	}
	return out
}

// pipelinedAnnotations returns the allocation the session reserved for a
// pipelined task, nil if it was not pipelined.
func pipelinedAnnotations(pc *preemptCluster, ssn *framework.Session, pod *v1.Pod) map[string]string {
	for _, job := range ssn.Jobs {
		for _, task := range job.Tasks {
			if task.Pod.UID == pod.UID && task.Status.String() == "Pipelined" {
				if a := pc.last.sess.allocs[task.UID]; a != nil && a.pipelined {
					return a.annotated().Annotations
				}
				return map[string]string{}
			}
		}
	}
	return nil
}

// unresolvableOn reports whether Volcano's preemption predicate skips the
// node for the pending pod (some plugin says UnschedulableAndUnresolvable),
// as the preempt and reclaim actions ask it.
func unresolvableOn(ssn *framework.Session, pod *v1.Pod, node string) bool {
	for _, job := range ssn.Jobs {
		if task := job.Tasks[vcapi.TaskID(pod.UID)]; task != nil {
			return ssn.PredicateForPreemptAction(task, ssn.Nodes[node]) != nil
		}
	}
	return false
}

// containsAll reports whether s contains every part.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
