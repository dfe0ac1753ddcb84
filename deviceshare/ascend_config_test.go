package deviceshare

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

const only310P = `vnpus:
- chipName: 310P3
  commonWord: Ascend310P
  memoryAllocatable: 21527
  memoryCapacity: 24576
  aiCore: 8
  aiCPU: 7
  templates:
  - {name: vir01, memory: 3072, aiCore: 1, aiCPU: 1}
`

const with910B4 = only310P + `- chipName: 910B4
  commonWord: Ascend910B4
  memoryCapacity: 32768
  aiCore: 20
  aiCPU: 7
  templates:
  - {name: vir05_1c_8g, memory: 8192, aiCore: 5, aiCPU: 1}
`

// TestAscendChipAddedToTheConfigMapIsScheduledWithoutRestart edits the
// device ConfigMap while the scheduler runs: the next configuration
// generation rebuilds the backends, and a pod of the new chip type is
// placed by template with its HAMi annotations.
func TestAscendChipAddedToTheConfigMapIsScheduledWithoutRestart(t *testing.T) {
	keys := ascendproto.KeysFor("Ascend910B4")
	node := npuNode("n1", true, "NPU-0")
	node.Annotations[keys.Register] = `[{"id":"B4-0","count":7,"devmem":32768,"type":"Ascend910B4","health":true}]`
	node.Status.Allocatable["huawei.com/Ascend910B4"] = resource.MustParse("7")
	node.Status.Allocatable["huawei.com/Ascend910B4-memory"] = resource.MustParse("32768")
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	c := newCluster(t, schedulerConf(ascendArgs), []*v1.Node{node}, nil)
	t.Cleanup(c.st.Close)

	cms := c.cache.Client().CoreV1().ConfigMaps(config.DefaultConfigMapNamespace)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultConfigMapName},
		Data: map[string]string{config.ConfigKey: only310P}}
	if _, err := cms.Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.session(nil) // starts the ConfigMap watch
	c.waitForBackends(t, "Ascend310P")

	cm.Data[config.ConfigKey] = with910B4
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitForBackends(t, "Ascend310P", "Ascend910B4")

	pod := devicePod("b4", "pg1", v1.ResourceList{
		"huawei.com/Ascend910B4":        resource.MustParse("1"),
		"huawei.com/Ascend910B4-memory": resource.MustParse("4000"),
	})
	c.addJob(podGroup("pg1", 1), pod)
	c.session(nil)
	got := c.waitBinds(1)[testNamespace+"/b4"].Annotations
	if got[keys.Allocated] != "B4-0,Ascend910B4,8192,0:;" || got[keys.RuntimeInfo] != `[{"UUID":"B4-0","temp":"vir05_1c_8g"}]` {
		t.Errorf("annotations %v, want B4-0 by template vir05_1c_8g", got)
	}
}

// waitForBackends runs sessions until the plugin serves exactly the named
// Ascend chip types (the ConfigMap watch is asynchronous).
func (c *cluster) waitForBackends(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.session(nil)
		c.st.mu.Lock()
		names := backendNames(c.st.backends)
		c.st.mu.Unlock()
		if slices.Equal(names, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends %v, want %v", names, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func backendNames(bs []device.Backend) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name())
	}
	return out
}
