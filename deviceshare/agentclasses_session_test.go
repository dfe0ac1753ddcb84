package deviceshare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// ownAgentNode is vgpuNode as this project's agent registers it: with each
// card's NUMA node, the seventh field.
func ownAgentNode(name string, cards ...vcard) *v1.Node {
	n := vgpuNode(name, cards...)
	n.Annotations[vgpuproto.AnnotationRegister] = strings.ReplaceAll(n.Annotations[vgpuproto.AnnotationRegister], ",hami-core:", ",hami-core,0:")
	return n
}

// The bind of a vGPU pod waits for the pods pending with the node agent in
// the pod's agent classes only: on a node of this project's agent, which
// serves an Allocate only to a pod whose next entry has as many cards, a
// pod's classes are its card counts, so a one-card pod and a two-card pod
// may be pending together; on an upstream agent's node every pod is in
// every class up to the node's cards, and all wait for each other.
func TestVGPUBindTurnsFollowTheAgent(t *testing.T) {
	cards := []vcard{{"GPU-0", "", 16000}, {"GPU-1", "", 16000}}
	for _, tc := range []struct {
		name string
		node *v1.Node
		want map[string][]string
	}{
		{"this project's agent", ownAgentNode("n1", cards...), map[string][]string{"one": {"1"}, "two": {"2"}}},
		{"volcano-vgpu-device-plugin", vgpuNode("n1", cards...), map[string][]string{"one": {"1", "2"}, "two": {"1", "2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{tc.node}, nil)
			one, two := vgpuPod("one", "pg1", 1, 4000, 25), vgpuPod("two", "pg1", 2, 4000, 25)
			c.addJob(podGroup("pg1", 2), one, two)
			c.session(nil)
			c.waitBinds(2)
			got := map[string][]string{}
			for _, p := range []*v1.Pod{one, two} {
				d := c.st.binder.Decisions.Assumed(p.UID)
				if d == nil || len(d.Ordered) != 1 {
					t.Fatalf("pod %s: decision %+v, want one ordered device type", p.Name, d)
				}
				got[p.Name] = d.Ordered[0].Classes()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("agent classes per pod (-want +got):\n%s", diff)
			}
		})
	}
}
