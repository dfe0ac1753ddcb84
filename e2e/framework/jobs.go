//go:build e2e

package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	"volcano.sh/apis/pkg/apis/helpers"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// JobNameLabel is the label Volcano puts on a Job's pods and PodGroup.
const JobNameLabel = batchv1alpha1.JobNameKey

// VGPUTask is one task of a Volcano Job whose single container asks for
// vGPUs.
type VGPUTask struct {
	Name      string
	Replicas  int32
	VGPUs     int64 // volcano.sh/vgpu-number
	MemoryMiB int64 // volcano.sh/vgpu-memory per card; 0 leaves it out
	Cores     int64 // volcano.sh/vgpu-cores; 0 leaves it out
	// Limits are further container limits (for example GPU share's
	// volcano.sh/gpu-memory); with VGPUs 0 the task asks for no vGPU.
	Limits v1.ResourceList
	// Annotations go on the task's pods (per-pod policies, selectors).
	Annotations map[string]string
	// Labels go on the task's pods.
	Labels map[string]string
	// NodeSelector pins the task's pods to matching nodes.
	NodeSelector map[string]string
	// Image is the container's image; empty means a CUDA base image's name
	// (simulated nodes never pull it). Args are its arguments.
	Image string
	Args  []string
	// Env is added to the container's environment.
	Env []v1.EnvVar
	// CPU and Memory are the container's requests; empty means 1 CPU and
	// 1Gi (a real node has 2 CPUs: its tests ask for less).
	CPU, Memory string
}

// VGPUJob returns a gang Volcano Job with what Volcano's admission webhook
// would default set explicitly (the harness runs no webhook): schedulerName,
// queue, minAvailable, maxRetry, task names and per-task minAvailable.
func VGPUJob(namespace, name string, tasks ...VGPUTask) *batchv1alpha1.Job {
	job := &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: "volcano",
			Queue:         "default",
			MaxRetry:      3,
		},
	}
	for _, t := range tasks {
		limits := v1.ResourceList{}
		if t.VGPUs > 0 {
			limits[vgpuproto.ResourceNumber] = *resource.NewQuantity(t.VGPUs, resource.DecimalSI)
		}
		for name, q := range t.Limits {
			limits[name] = q
		}
		if t.MemoryMiB > 0 {
			limits[vgpuproto.ResourceMemory] = *resource.NewQuantity(t.MemoryMiB, resource.DecimalSI)
		}
		if t.Cores > 0 {
			limits[vgpuproto.ResourceCores] = *resource.NewQuantity(t.Cores, resource.DecimalSI)
		}
		image, cpu, mem := t.Image, t.CPU, t.Memory
		if image == "" {
			image = "nvidia/cuda:12.4.1-base-ubuntu22.04"
		}
		if cpu == "" {
			cpu = "1"
		}
		if mem == "" {
			mem = "1Gi"
		}
		minAvailable := t.Replicas
		job.Spec.MinAvailable += t.Replicas
		job.Spec.Tasks = append(job.Spec.Tasks, batchv1alpha1.TaskSpec{
			Name:         t.Name,
			Replicas:     t.Replicas,
			MinAvailable: &minAvailable,
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: t.Annotations, Labels: t.Labels}, Spec: v1.PodSpec{
				SchedulerName: "volcano",
				NodeSelector:  t.NodeSelector,
				RestartPolicy: v1.RestartPolicyNever,
				Containers: []v1.Container{{
					Name:  "cuda",
					Image: image,
					Args:  t.Args,
					Env:   t.Env,
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)},
						Limits:   limits,
					},
				}},
			}},
		})
	}
	return job
}

// CreateNamespace creates namespace name (existing is fine).
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if c.real != nil {
		// ServiceAccount admission refuses the namespace's pods until the
		// controller-manager has made its default ServiceAccount.
		return c.waitServiceAccount(ctx, name)
	}
	return nil
}

// CreateJob submits a Volcano Job.
func (c *Cluster) CreateJob(ctx context.Context, job *batchv1alpha1.Job) error {
	if _, err := c.Volcano.BatchV1alpha1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// WaitJobRunning waits until the Job is Running and all its pods are Running.
func (c *Cluster) WaitJobRunning(ctx context.Context, namespace, name string, timeout time.Duration) error {
	return c.Poll(ctx, timeout, "job "+namespace+"/"+name+" Running", func(ctx context.Context) (bool, error) {
		job, err := c.Volcano.BatchV1alpha1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if job.Status.State.Phase != batchv1alpha1.Running {
			return false, fmt.Errorf("job phase %q", job.Status.State.Phase)
		}
		pods, err := c.JobPods(ctx, namespace, name)
		if err != nil {
			return false, err
		}
		if int32(len(pods)) < job.Spec.MinAvailable {
			return false, fmt.Errorf("%d pods, want %d", len(pods), job.Spec.MinAvailable)
		}
		for _, p := range pods {
			if p.Status.Phase != v1.PodRunning {
				return false, fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
		}
		return true, nil
	})
}

// JobPods lists the Job's pods.
func (c *Cluster) JobPods(ctx context.Context, namespace, name string) ([]v1.Pod, error) {
	list, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: JobNameLabel + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("list pods of job %s/%s: %w", namespace, name, err)
	}
	return list.Items, nil
}

// DeleteJob deletes the Job with its pods and PodGroup and waits until the
// pods are gone. The harness runs no garbage collector
// (kube-controller-manager), so owned objects are deleted by label.
func (c *Cluster) DeleteJob(ctx context.Context, namespace, name string) error {
	err := c.Volcano.BatchV1alpha1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s/%s: %w", namespace, name, err)
	}
	sel := metav1.ListOptions{LabelSelector: JobNameLabel + "=" + name}
	if err := c.Kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete pods of job %s/%s: %w", namespace, name, err)
	}
	pgs, err := c.Volcano.SchedulingV1beta1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list podgroups in %s: %w", namespace, err)
	}
	for _, pg := range pgs.Items {
		if ownedByJob(pg.OwnerReferences, name) {
			_ = c.Volcano.SchedulingV1beta1().PodGroups(namespace).Delete(ctx, pg.Name, metav1.DeleteOptions{})
		}
	}
	return c.Poll(ctx, time.Minute, "pods of job "+namespace+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		pods, err := c.JobPods(ctx, namespace, name)
		return err == nil && len(pods) == 0, err
	})
}

func ownedByJob(refs []metav1.OwnerReference, job string) bool {
	for _, r := range refs {
		if r.Kind == helpers.JobKind.Kind && r.Name == job {
			return true
		}
	}
	return false
}

// UnschedulableMessages returns the Job's PodGroup Unschedulable condition
// message and one pod's PodScheduled=False message: where the scheduler
// says why a Job waits.
func (c *Cluster) UnschedulableMessages(ctx context.Context, ns, job string) (pg, pod string) {
	pgs, err := c.Volcano.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, g := range pgs.Items {
			if !strings.HasPrefix(g.Name, job+"-") {
				continue
			}
			for _, cond := range g.Status.Conditions {
				if cond.Type == schedulingv1beta1.PodGroupUnschedulableType && cond.Status == v1.ConditionTrue {
					pg = cond.Message
				}
			}
		}
	}
	pods, err := c.JobPods(ctx, ns, job)
	if err == nil {
		for _, p := range pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse {
					pod = cond.Message
				}
			}
		}
	}
	return pg, pod
}
