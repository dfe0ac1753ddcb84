//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// ascendConf enables the HAMi Ascend backends next to vGPU.
var ascendConf = schedConf("deviceshare.VGPUEnable: true", "deviceshare.AscendHAMiVNPUEnable: true")

// addAscendNode adds a simulated Ascend node for the rest of the test.
func addAscendNode(ctx context.Context, t *testing.T, spec framework.AscendNode) {
	t.Helper()
	if _, err := cluster.AddAscendNode(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.RemoveNode(context.Background(), spec.Name); err != nil {
			t.Errorf("remove node %s: %v", spec.Name, err)
		}
	})
}

// TestAscendHAMiVNPU: HAMi-mode Ascend 910B3 vNPUs from submission to
// Running through the simulated HAMi agent. A 2-pod gang asks for one vNPU
// of 12000 MiB each: the scheduler rounds it up to the smallest template
// that holds it (vir05_1c_16g, 16384 MiB), the agent's Allocate returns the
// chip and the template, and moves hami.io/bind-phase to success. The memory
// resource (huawei.com/Ascend910B3-memory) is advertised by no kubelet
// plugin; the pods pass Volcano's own resource fit because the scheduler
// advertises the cards' total in the node status. A hami-core node serves a
// soft-sliced pod with the memory quota in its environment.
func TestAscendHAMiVNPU(t *testing.T) {
	const ns = "ascend-hami"
	ctx := setup(t, ns, 6*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Conf: ascendConf})
	addAscendNode(ctx, t, framework.AscendNode{Name: "npu-node-0", Chip: "Ascend910B3", Chips: 2, Labels: map[string]string{"npu": "template"}})
	addAscendNode(ctx, t, framework.AscendNode{Name: "npu-node-1", Chip: "Ascend910B3", Chips: 2, Mode: "hami-core", Labels: map[string]string{"npu": "hami-core"}})

	const res, memRes = "huawei.com/Ascend910B3", "huawei.com/Ascend910B3-memory"
	err := cluster.Poll(ctx, time.Minute, "the scheduler advertising "+memRes, func(ctx context.Context) (bool, error) {
		n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, "npu-node-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[memRes]
		return q.Value() == 2*65536, fmt.Errorf("allocatable %s=%s", memRes, q.String())
	})
	if err != nil {
		t.Fatal(err)
	}

	job := framework.VGPUJob(ns, "template", framework.VGPUTask{
		Name: "npu", Replicas: 2,
		Limits:       v1.ResourceList{res: resource.MustParse("1"), memRes: resource.MustParse("12000")},
		NodeSelector: map[string]string{"npu": "template"},
	})
	mustRun(ctx, t, job)
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		key := ascendproto.KeysFor("Ascend910B3").RuntimeInfo
		info, err := ascendproto.DecodeRuntimeInfo(pod.Annotations[key])
		if err != nil || len(info) != 1 || info[0].Temp != "vir05_1c_16g" {
			t.Errorf("pod %s: %s=%+v (%v), want one chip with template vir05_1c_16g", pod.Name, key, info, err)
		}
		envs := ascendAllocation(ctx, t, pod)
		if envs[ascendproto.EnvVNPUSpecs] != "vir05_1c_16g" || envs[ascendproto.EnvVisibleDevices] == "" {
			t.Errorf("pod %s: Allocate env %v, want ASCEND_VNPU_SPECS=vir05_1c_16g and a visible device", pod.Name, envs)
		}
	}

	soft := framework.VGPUJob(ns, "soft", framework.VGPUTask{
		Name: "npu", Replicas: 1,
		Limits:       v1.ResourceList{res: resource.MustParse("1"), memRes: resource.MustParse("10000")},
		Annotations:  map[string]string{ascendproto.AnnotationVNPUMode: ascendproto.ModeHAMiCore},
		NodeSelector: map[string]string{"npu": "hami-core"},
	})
	mustRun(ctx, t, soft)
	pods, err = cluster.JobPods(ctx, ns, soft.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		envs := ascendAllocation(ctx, t, pod)
		if envs["NPU_MEM_QUOTA"] == "" || envs[ascendproto.EnvVNPUSpecs] != "" {
			t.Errorf("pod %s: Allocate env %v, want the hami-core memory quota and no template", pod.Name, envs)
		}
	}
}

// TestAscendChipTypeAddedByConfigMapEdit: a chip type that is not in the
// configuration becomes schedulable by adding a vnpus entry to the
// volcano-vgpu-device-config ConfigMap, without restarting the scheduler;
// removing the entry stops new allocations while the running pod keeps its
// chip.
func TestAscendChipTypeAddedByConfigMapEdit(t *testing.T) {
	const ns = "ascend-cm"
	ctx := setup(t, ns, 6*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Conf: ascendConf})
	cms := cluster.Kube.CoreV1().ConfigMaps(config.DefaultConfigMapNamespace)
	const entry = `vnpus:
- chipName: 910X
  commonWord: Ascend910X
  resourceName: huawei.com/Ascend910X
  resourceMemoryName: huawei.com/Ascend910X-memory
  memoryAllocatable: 32768
  memoryCapacity: 32768
  aiCore: 20
  aiCPU: 7
  templates:
  - name: vir10_3c_16g
    memory: 16384
    aiCore: 10
    aiCPU: 3
`
	applied, err := cluster.SchedulerLogCount("Device config changed")
	if err != nil {
		t.Fatal(err)
	}
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: config.DefaultConfigMapName, Namespace: config.DefaultConfigMapNamespace},
		Data:       map[string]string{config.ConfigKey: entry},
	}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the device ConfigMap: %v", err)
		}
	})
	waitConfigApplied(ctx, t, applied)
	// The agent reads the entry from the ConfigMap when it starts.
	addAscendNode(ctx, t, framework.AscendNode{Name: "npu-x-0", Chip: "Ascend910X", Chips: 1})
	limits := v1.ResourceList{"huawei.com/Ascend910X": resource.MustParse("1"), "huawei.com/Ascend910X-memory": resource.MustParse("16000")}
	first := framework.VGPUJob(ns, "first", framework.VGPUTask{Name: "npu", Replicas: 1, Limits: limits})
	mustRun(ctx, t, first)
	pods, err := cluster.JobPods(ctx, ns, first.Name)
	if err != nil {
		t.Fatal(err)
	}
	if envs := ascendAllocation(ctx, t, pods[0]); envs["ASCEND_VNPU_SPECS"] != "vir10_3c_16g" {
		t.Errorf("pod %s: Allocate env %v, want the new entry's template vir10_3c_16g", pods[0].Name, envs)
	}

	// Removing the entry: the running pod keeps its chip, a new pod for
	// the chip type is refused with the reason.
	applied, err = cluster.SchedulerLogCount("Device config changed")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[config.ConfigKey] = "nvidia:\n  deviceSplitCount: 10\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigApplied(ctx, t, applied)
	second := framework.VGPUJob(ns, "second", framework.VGPUTask{Name: "npu", Replicas: 1, Limits: limits})
	waitPendingWithReason(ctx, t, second, "huawei.com/Ascend910X")
	pod, err := cluster.Kube.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
	if err != nil || pod.Status.Phase != v1.PodRunning {
		t.Errorf("pod %s after the entry was removed: %v, phase %q; want it still Running", pods[0].Name, err, pod.Status.Phase)
	}
}

// waitConfigApplied waits until the scheduler logged one more applied
// device configuration than before.
func waitConfigApplied(ctx context.Context, t *testing.T, before int) {
	t.Helper()
	err := cluster.Poll(ctx, time.Minute, "the scheduler applying the device ConfigMap", func(context.Context) (bool, error) {
		n, err := cluster.SchedulerLogCount("Device config changed")
		return n > before, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ascendAllocation waits for the fake kubelet's Allocate of the pod's one
// container and for hami.io/bind-phase success, and returns the
// environment the agent answered.
func ascendAllocation(ctx context.Context, t *testing.T, pod v1.Pod) map[string]string {
	t.Helper()
	node := cluster.Node(pod.Spec.NodeName)
	if node == nil {
		t.Fatalf("pod %s bound to %q, not a node of the harness", pod.Name, pod.Spec.NodeName)
	}
	var alloc framework.PodAllocation
	err := cluster.Poll(ctx, 30*time.Second, "Allocate for pod "+pod.Name, func(context.Context) (bool, error) {
		var ok bool
		alloc, ok = node.Kubelet.Allocation(pod.UID)
		if !ok || len(alloc.Containers) != 1 {
			return false, nil
		}
		if e := alloc.Containers[0].Err; e != "" {
			return false, fmt.Errorf("attempt %d: %s", alloc.Containers[0].Attempts, e)
		}
		return alloc.Containers[0].Envs != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, 30*time.Second, "hami.io/bind-phase success on "+pod.Name, func(ctx context.Context) (bool, error) {
		got, err := cluster.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase := got.Annotations[ascendproto.AnnotationBindPhase]
		return phase == ascendproto.BindPhaseSuccess, fmt.Errorf("bind-phase %q", phase)
	})
	if err != nil {
		t.Error(err)
	}
	envs := alloc.Containers[0].Envs
	var keys []string
	for k, v := range envs {
		if strings.HasPrefix(k, "ASCEND") || strings.HasPrefix(k, "NPU") {
			keys = append(keys, k+"="+v)
		}
	}
	t.Logf("pod %s on %s: Allocate(%v): %v", pod.Name, pod.Spec.NodeName, alloc.Containers[0].DeviceIDs, keys)
	return envs
}
