//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/mindcluster"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// TestMindCluster310PVNPU: Ascend 310P vNPUs the MindCluster way. The test
// writes what Huawei's agents write for a 2-chip Atlas inference node
// (capacity huawei.com/npu-core, the servertype and chip-name labels, and
// the device-info ConfigMap kube-system/mindx-dl-deviceinfo-<node>) and
// plays the device plugin's confirmation (huawei.com/AscendReal). A
// 2-core high-level vNPU gets "<chip>-vir02"; a second vNPU waits while
// the first is being created on the node (one template in flight per
// node) and runs once it is confirmed; an 8-core pod gets a whole chip.
func TestMindCluster310PVNPU(t *testing.T) {
	const ns, node = "mindcluster", "npu-310p-0"
	ctx := setup(t, ns, 6*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Conf: schedConf(
		"deviceshare.VGPUEnable: true", "deviceshare.AscendMindClusterVNPUEnable: true")})
	cms := cluster.Kube.CoreV1().ConfigMaps(mindclusterproto.DeviceInfoNamespace)
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: mindclusterproto.DeviceInfoPrefix + node, Namespace: mindclusterproto.DeviceInfoNamespace},
		Data: mindclusterproto.DeviceInfoData(map[string]string{mindclusterproto.AnnotationFreeChips: mindclusterproto.EncodeChips(0, 1)},
			time.Now().Unix()),
	}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), cm.Name, metav1.DeleteOptions{}) })
	err := cluster.AddNode(ctx, node, v1.ResourceList{mindclusterproto.ResourceNPUCore: resource.MustParse("16")}, nil, map[string]string{
		mindclusterproto.LabelServerType: "Ascend310P-8",
		mindclusterproto.LabelChipName:   "310P3",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), node) })

	task := func(cores string, labels map[string]string) framework.VGPUTask {
		l := map[string]string{mindclusterproto.LabelRingController: mindclusterproto.RingController310P}
		for k, v := range labels {
			l[k] = v
		}
		return framework.VGPUTask{Name: "npu", Replicas: 1, Labels: l,
			Limits: v1.ResourceList{mindclusterproto.ResourceNPUCore: resource.MustParse(cores)}}
	}
	first := framework.VGPUJob(ns, "first", task("2", map[string]string{mindclusterproto.LabelVNPULevel: "high"}))
	mustRun(ctx, t, first)
	firstPod := onlyPod(ctx, t, ns, first.Name)
	chip := npuCore(t, firstPod)
	if chip != "0-vir02" && chip != "1-vir02" {
		t.Errorf("pod %s: %s=%q, want <chip>-vir02", firstPod.Name, mindclusterproto.AnnotationNPUCore, chip)
	}
	if a := firstPod.Annotations; a[mindclusterproto.AnnotationPredicateTime] == "" ||
		a[mindclusterproto.AnnotationPredicateTime] != a[mindclusterproto.AnnotationVolcanoPredicateTime] {
		t.Errorf("pod %s: predicate-time %q and volcano.sh/predicate-time %q, want the same time",
			firstPod.Name, a[mindclusterproto.AnnotationPredicateTime], a[mindclusterproto.AnnotationVolcanoPredicateTime])
	}

	// The device plugin has not created the vNPU yet: a second one waits.
	second := framework.VGPUJob(ns, "second", task("2", nil))
	waitPendingWithReason(ctx, t, second, mindcluster.ReasonInFlight)
	real := fmt.Sprintf(`{"metadata":{"annotations":{%q:"Ascend310P-2c.2cpu-100-%s_0"}}}`, mindclusterproto.AnnotationAscendReal, chip[:1])
	if _, err := cluster.Kube.CoreV1().Pods(ns).Patch(ctx, firstPod.Name, types.MergePatchType, []byte(real), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitJobRunning(ctx, ns, second.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	secondPod := onlyPod(ctx, t, ns, second.Name)
	t.Logf("second vNPU: %s=%q", mindclusterproto.AnnotationNPUCore, npuCore(t, secondPod))

	// Binpack keeps the vNPUs on one chip, so 8 cores take the other whole.
	whole := framework.VGPUJob(ns, "whole", task("8", nil))
	mustRun(ctx, t, whole)
	want := "1"
	if chip[:1] == "1" {
		want = "0"
	}
	if got := npuCore(t, onlyPod(ctx, t, ns, whole.Name)); got != want {
		t.Errorf("8-core pod: %s=%q, want the free whole chip %q", mindclusterproto.AnnotationNPUCore, got, want)
	}
}

func onlyPod(ctx context.Context, t *testing.T, ns, job string) v1.Pod {
	t.Helper()
	pods, err := cluster.JobPods(ctx, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 {
		t.Fatalf("job %s has %d pods, want 1", job, len(pods))
	}
	return pods[0]
}

func npuCore(t *testing.T, pod v1.Pod) string {
	t.Helper()
	v, ok := pod.Annotations[mindclusterproto.AnnotationNPUCore]
	if !ok {
		t.Errorf("pod %s on %s has no %s annotation", pod.Name, pod.Spec.NodeName, mindclusterproto.AnnotationNPUCore)
	}
	return v
}
