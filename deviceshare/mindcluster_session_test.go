package deviceshare

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/backends/mindcluster"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

const mindClusterArgs = `      deviceshare.AscendMindClusterVNPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`

// chipList renders chip IDs the way MindCluster's device plugin lists them.
func chipList(ids ...int) string { return mindclusterproto.EncodeChips(ids...) }

// mcNode builds a MindCluster 310P node with chips 8-core chips, labelled
// and annotated as MindCluster's agents do; free is the offered chip list
// ("-" leaves the annotation out) and extra arguments are annotation
// key/value pairs.
func mcNode(name string, chips int, free string, annotations ...string) *v1.Node {
	n := util.BuildNode(name, v1.ResourceList{
		v1.ResourceCPU:                   resource.MustParse("64"),
		v1.ResourceMemory:                resource.MustParse("256Gi"),
		v1.ResourcePods:                  resource.MustParse("110"),
		mindclusterproto.ResourceNPUCore: *resource.NewQuantity(int64(8*chips), resource.DecimalSI),
	}, map[string]string{mindclusterproto.LabelServerType: "Ascend310P-8", mindclusterproto.LabelChipName: "310P3"})
	n.Annotations = map[string]string{}
	if free != "-" {
		n.Annotations[mindclusterproto.AnnotationFreeChips] = free
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

// mcPod is a pending pod of the group asking for cores AI cores, labelled
// for 310P; extra arguments are label key/value pairs.
func mcPod(name, group string, cores int64, labels ...string) *v1.Pod {
	p := devicePod(name, group, v1.ResourceList{mindclusterproto.ResourceNPUCore: *resource.NewQuantity(cores, resource.DecimalSI)})
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[mindclusterproto.LabelRingController] = mindclusterproto.RingController310P
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	return p
}

// addRunning adds a running pod on node holding the allocation value,
// confirmed by the device plugin (huawei.com/AscendReal).
func (c *cluster) addRunning(name, node string, cores int64, value string, labels ...string) {
	p := mcPod(name, "pg-"+name, cores, labels...)
	p.Spec.NodeName, p.Status.Phase = node, v1.PodRunning
	p.Annotations[mindclusterproto.AnnotationNPUCore] = value
	p.Annotations[mindclusterproto.AnnotationAscendReal] = "Ascend310P-real-" + value
	pg := podGroup("pg-"+name, 1)
	pg.Status.Phase = schedulingv1beta1.PodGroupRunning
	c.addJob(pg, p)
}

// npuCores returns, per bound pod, "node/huawei.com/npu-core".
func npuCores(binds map[string]boundPod) map[string]string {
	out := map[string]string{}
	for k, b := range binds {
		out[strings.TrimPrefix(k, testNamespace+"/")] = b.Node + "/" + b.Annotations[mindclusterproto.AnnotationNPUCore]
	}
	return out
}

// TestMindClusterTemplateOnBatchPreferredNode checks that the batch scorer
// decides the node: the fewest free AI cores wins, except over a node that
// would need a downgrade, and the pod gets the template annotation and
// predicate times MindCluster's device plugin reads.
func TestMindClusterTemplateOnBatchPreferredNode(t *testing.T) {
	high := []string{mindclusterproto.LabelVNPULevel, "high"}
	newNodes := func() []*v1.Node {
		return []*v1.Node{mcNode("idle", 2, chipList(0, 1)), mcNode("busy", 1, chipList(0)), mcNode("down", 1, chipList(0))}
	}
	t.Run("fewest free cores", func(t *testing.T) {
		c := newCluster(t, schedulerConf(mindClusterArgs), newNodes(), nil)
		c.addRunning("r1", "busy", 4, "0-vir04_3c")                 // 4 AI cores and 4 AI CPUs free
		c.addRunning("r2", "down", 4, "0-vir04", high...)           // 2 AI cores, 1 AI CPU free:
		c.addRunning("r3", "down", 2, "0-vir02", high...)           // a high vir02 must downgrade
		c.addJob(podGroup("pg1", 1), mcPod("w", "pg1", 2, high...)) // vir02
		c.session(nil)
		b := c.waitBinds(1)[testNamespace+"/w"]
		nanos := strconv.FormatInt(testTime.UnixNano(), 10)
		want := map[string]string{mindclusterproto.AnnotationNPUCore: "0-vir02", mindclusterproto.AnnotationPredicateTime: nanos,
			mindclusterproto.AnnotationVolcanoPredicateTime: nanos}
		got := map[string]string{}
		for k := range want {
			got[k] = b.Annotations[k]
		}
		if b.Node != "busy" || !cmp.Equal(want, got) {
			t.Errorf("w bound to %s with %v, want busy with %v", b.Node, got, want)
		}
	})
	t.Run("a downgrade scores below more free cores", func(t *testing.T) {
		nodes := newNodes()
		c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{nodes[0], nodes[2]}, nil)
		c.addRunning("r2", "down", 4, "0-vir04", high...)
		c.addRunning("r3", "down", 2, "0-vir02", high...)
		c.addJob(podGroup("pg1", 1), mcPod("w", "pg1", 2, high...))
		c.session(nil)
		if diff := cmp.Diff(map[string]string{"w": "idle/0-vir02"}, npuCores(c.waitBinds(1))); diff != "" {
			t.Errorf("placement (-want +got):\n%s", diff)
		}
	})
}

// TestMindClusterGangOfTwo places two gangs: two vNPUs land on two nodes,
// because a node takes one vNPU at a time until the device plugin has
// created it; two whole chips land on one node.
func TestMindClusterGangOfTwo(t *testing.T) {
	t.Run("vNPUs", func(t *testing.T) {
		c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{mcNode("n1", 1, chipList(0)), mcNode("n2", 1, chipList(0))}, nil)
		c.addJob(podGroup("vnpus", 2), mcPod("a", "vnpus", 1), mcPod("b", "vnpus", 1))
		c.session(nil)
		got := npuCores(c.waitBinds(2))
		if got["a"] == got["b"] || !strings.HasSuffix(got["a"], "/0-vir01") || !strings.HasSuffix(got["b"], "/0-vir01") {
			t.Errorf("vNPU gang = %v, want vir01 on chip 0 of two different nodes", got)
		}
	})
	t.Run("whole chips", func(t *testing.T) {
		c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{mcNode("n1", 2, chipList(0, 1))}, nil)
		c.addJob(podGroup("chips", 2), mcPod("x", "chips", 8), mcPod("y", "chips", 8))
		c.session(nil)
		got := npuCores(c.waitBinds(2))
		chips := []string{got["x"], got["y"]}
		if !cmp.Equal(chips, []string{"n1/0", "n1/1"}) && !cmp.Equal(chips, []string{"n1/1", "n1/0"}) {
			t.Errorf("whole-chip gang = %v, want chips 0 and 1 of n1", chips)
		}
	})
	t.Run("vNPUs wait for a second node", func(t *testing.T) {
		// One node takes one vNPU at a time: a gang of two stays pending
		// on it rather than racing the device plugin.
		c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{mcNode("n1", 2, chipList(0, 1))}, nil)
		a, b := mcPod("a", "vnpus", 1), mcPod("b", "vnpus", 1)
		c.addJob(podGroup("vnpus", 2), a, b)
		msg := sessionFitMessages(c, a, b)
		c.expectNoBind()
		if !strings.Contains(msg, mindcluster.ReasonInFlight) {
			t.Errorf("fit errors %q do not say a vNPU is in flight", msg)
		}
	})
}

// TestMindClusterTooLargeStaysPending checks that a pod asking for more
// chips than any node offers stays pending with the reason. (A pod asking
// for more AI cores than any node's capacity never reaches the plugin:
// Volcano's queue accounting keeps it pending first.)
func TestMindClusterTooLargeStaysPending(t *testing.T) {
	// Four chips by capacity, two of them unhealthy: Volcano's own fit
	// passes 24 AI cores, the backend says why they do not fit.
	c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{
		mcNode("n1", 4, chipList(0, 1, 2, 3), mindclusterproto.AnnotationUnhealthyChips, chipList(2, 3)),
	}, nil)
	three := mcPod("three", "pg1", 24)
	c.addJob(podGroup("pg1", 1), three)
	msg := sessionFitMessages(c, three)
	c.expectNoBind()
	for _, want := range []string{mindcluster.ReasonTooFewChips, mindcluster.ReasonChipUnhealthy} {
		if !strings.Contains(msg, want) {
			t.Errorf("fit error %q does not say %q", msg, want)
		}
	}
}

// TestMindClusterDeviceInfoAndInFlight reads a node's chips from its
// device-info ConfigMap alone and checks the in-flight rule across
// sessions: the second vNPU waits until the device plugin has confirmed the
// first (huawei.com/AscendReal on the pod).
func TestMindClusterDeviceInfoAndInFlight(t *testing.T) {
	c := newCluster(t, schedulerConf(mindClusterArgs), []*v1.Node{mcNode("n1", 2, "-")}, nil)
	t.Cleanup(c.st.Close)
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: mindclusterproto.DeviceInfoNamespace, Name: mindclusterproto.DeviceInfoPrefix + "n1"},
		Data:       mindclusterproto.DeviceInfoData(map[string]string{mindclusterproto.AnnotationFreeChips: chipList(1)}, testTime.Unix()),
	}
	if _, err := c.cache.Client().CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first, second := mcPod("first", "pg1", 1), mcPod("second", "pg2", 1)
	c.addJob(podGroup("pg1", 1), first)
	c.session(nil)
	if got := npuCores(c.waitBinds(1))["first"]; got != "n1/1-vir01" {
		t.Fatalf("first = %q, want n1/1-vir01 (chip 1 is the only one the ConfigMap offers)", got)
	}
	placed := c.confirmBinds(first)[0]

	c.addJob(podGroup("pg2", 1), second)
	msg := sessionFitMessages(c, second)
	c.expectNoBind()
	if !strings.Contains(msg, mindcluster.ReasonInFlight) {
		t.Errorf("fit error %q does not say a vNPU is in flight", msg)
	}

	confirmed := placed.DeepCopy()
	confirmed.Annotations[mindclusterproto.AnnotationAscendReal] = "Ascend310P-1c-100-1_0"
	confirmed.ResourceVersion = "3"
	c.cache.UpdatePod(placed, confirmed)
	deadline := time.Now().Add(10 * time.Second)
	for len(c.bound()) < 2 && time.Now().Before(deadline) {
		c.session(nil)
	}
	if got := npuCores(c.bound())["second"]; got != "n1/1-vir01" {
		t.Errorf("second = %q, want n1/1-vir01 once the first was confirmed", got)
	}
}
