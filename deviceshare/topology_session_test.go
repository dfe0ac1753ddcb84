package deviceshare

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// agentNode is a node as this project's agent registers it: the 7-field
// registration with each card's NUMA node ("<name>-<i>" UUIDs, 16000 MiB),
// and the link scores when score is not empty.
func agentNode(name string, numa []int32, score string) *v1.Node {
	vcards := make([]vcard, len(numa))
	cards := make([]vgpuproto.Card, len(numa))
	for i, n := range numa {
		id := fmt.Sprintf("%s-%d", name, i)
		vcards[i] = vcard{uuid: id, mem: 16000}
		cards[i] = vgpuproto.Card{UUID: id, Count: 10, MemMiB: 16000, Type: "NVIDIA-H100", Healthy: true,
			Mode: vgpuproto.ModeHAMiCore, NUMA: n}
	}
	node := vgpuNode(name, vcards...)
	node.Annotations[vgpuproto.AnnotationRegister] = vgpuproto.EncodeRegister(cards)
	if score != "" {
		node.Annotations[vgpuproto.AnnotationHAMiScore] = score
	}
	return node
}

// TestNUMABindOnAgentRegistration: with the NUMA nodes our agent now
// registers (cards 0,1 on NUMA 0, 2,3 on NUMA 1), a 2-card numa-bind pod
// takes two cards of one NUMA node; while one card of each node is full, a
// second waits with the NUMA reason although two cards are free.
func TestNUMABindOnAgentRegistration(t *testing.T) {
	node := agentNode("n1", []int32{0, 0, 1, 1}, "")
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{node}, nil)
	full0 := vgpuPod("full0", "pg0", 2, 16000, -1, vgpuproto.AnnotationUseUUID, "n1-1,n1-3")
	c.addJob(podGroup("pg0", 1), full0)
	c.session(nil)
	c.waitBinds(1)
	bind := vgpuPod("bind", "pg1", 2, 8000, -1, vgpuproto.AnnotationNUMABind, "true")
	c.addJob(podGroup("pg1", 1), bind)
	if msg := sessionFitMessages(c, bind); !strings.Contains(msg, vgpu.ReasonNUMASplit) {
		t.Fatalf("fit message %q does not give the NUMA reason %q", msg, vgpu.ReasonNUMASplit)
	}
}

// TestNUMABindTakesOneNode: the same node empty, the numa-bind pod gets
// cards of one NUMA node (the registration's 7th field is read).
func TestNUMABindTakesOneNode(t *testing.T) {
	node := agentNode("n1", []int32{0, 1, 0, 1}, "")
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{node}, nil)
	c.addJob(podGroup("pg1", 1), vgpuPod("bind", "pg1", 2, 8000, -1, vgpuproto.AnnotationNUMABind, "true"))
	c.session(nil)
	got := vgpuCards(c.waitBinds(1))["bind"]
	if got != "n1/n1-0,n1-2" && got != "n1/n1-1,n1-3" {
		t.Errorf("numa-bind pod got %s, want cards 0,2 or 1,3 (one NUMA node)", got)
	}
}

// TestUnreadableScoresWarnOnNode: link scores that do not parse leave the
// node's cards usable and put a Warning event on the node naming the
// annotation.
func TestUnreadableScoresWarnOnNode(t *testing.T) {
	node := agentNode("n1", []int32{0, 0}, `[{"uuid":"n1-0","score":{"n1-1":-5}}]`)
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{node}, nil)
	c.addJob(podGroup("pg1", 1), vgpuPod("a", "pg1", 2, 8000, -1, vgpuproto.AnnotationGPUPolicy, vgpu.PolicyTopologyAware))
	c.session(nil)
	if binds := c.waitBinds(1); len(binds) != 1 {
		t.Fatalf("binds %v, want the pod bound", binds)
	}
	c.waitForEvent(EventDegradedRegistration, vgpuproto.AnnotationHAMiScore)
}
