//go:build e2e

package framework

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// Setup returns a context bounded by timeout and a fresh namespace (with
// its default ServiceAccount on a real node's control plane); when the test
// fails, the children's log tails are printed.
func (c *Cluster) Setup(t testing.TB, namespace string, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log tails:\n%s", c.Tails(40))
		}
	})
	if err := c.CreateNamespace(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// RunJob creates the Job, deletes it when the test ends, waits until it
// runs and returns its pods by task name.
func (c *Cluster) RunJob(ctx context.Context, t testing.TB, job *batchv1alpha1.Job) map[string]v1.Pod {
	t.Helper()
	if err := c.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteJob(context.Background(), job.Namespace, job.Name) })
	if err := c.WaitJobRunning(ctx, job.Namespace, job.Name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := c.JobPods(ctx, job.Namespace, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	byTask := map[string]v1.Pod{}
	for _, p := range pods {
		byTask[p.Annotations[batchv1alpha1.TaskSpecKey]] = p
	}
	return byTask
}
