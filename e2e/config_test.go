//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/e2e/framework"
)

// TestConfigMapEditsApplyWithoutRestart: the scheduler watches the device
// ConfigMap. A broken edit is rejected with a Warning event on the
// ConfigMap while the last good configuration (here the defaults) keeps
// scheduling; a good edit (nvidia.defaultMemory) changes what the next pods
// get, without a restart; deleting the ConfigMap returns to the defaults.
func TestConfigMapEditsApplyWithoutRestart(t *testing.T) {
	const ns = "config-edit"
	ctx := setup(t, ns, 4*time.Minute)
	cms := cluster.Kube.CoreV1().ConfigMaps(config.DefaultConfigMapNamespace)
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: config.DefaultConfigMapName, Namespace: config.DefaultConfigMapNamespace},
		Data:       map[string]string{config.ConfigKey: "nvidia:\n  deviceSplitCount: 0\n"},
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

	// The broken edit is reported where operators look.
	err := cluster.Poll(ctx, time.Minute, "InvalidDeviceConfig event", func(ctx context.Context) (bool, error) {
		evs, err := cluster.Kube.CoreV1().Events(cm.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": cm.Name, "reason": config.ReasonInvalidDeviceConfig}.String(),
		})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == v1.EventTypeWarning {
				t.Logf("event: %s", e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The defaults keep serving: no memory asked means the whole card.
	runOne(ctx, t, ns, "before", "40960")

	// A good edit applies without a restart.
	applied, err := cluster.SchedulerLogCount("Device config changed")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[config.ConfigKey] = "nvidia:\n  defaultMemory: 3000\n"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, time.Minute, "the scheduler applying the edit", func(context.Context) (bool, error) {
		n, err := cluster.SchedulerLogCount("Device config changed")
		return n > applied, err
	})
	if err != nil {
		t.Fatal(err)
	}
	runOne(ctx, t, ns, "after", "3000")
}

// runOne runs a one-pod Job asking for a vGPU and 10% of its SMs, no
// memory, checks the memory it was given end to end and deletes it.
func runOne(ctx context.Context, t *testing.T, ns, name, wantMiB string) {
	t.Helper()
	job := framework.VGPUJob(ns, name, framework.VGPUTask{Name: "main", Replicas: 1, VGPUs: 1, Cores: 10})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cluster.DeleteJob(context.Background(), ns, job.Name); err != nil {
			t.Errorf("delete job %s: %v", job.Name, err)
		}
	}()
	if err := cluster.WaitJobRunning(ctx, ns, job.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 {
		t.Fatalf("job %s has %d pods, want 1", job.Name, len(pods))
	}
	checkAllocated(ctx, t, pods[0], wantMiB, "10")
}
