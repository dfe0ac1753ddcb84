//go:build e2e

package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ReasonUnexpectedAdmissionError is the pod status reason the kubelet sets
// when a device plugin's Allocate fails while it admits the pod.
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// kubeletFaults are a FakeKubelet's fault-campaign hooks. The zero value
// injects nothing and keeps the harness's lenient retries.
type kubeletFaults struct {
	mu sync.Mutex
	// before runs right before each Allocate call, on the admitting
	// goroutine.
	before func(types.UID)
	// failPods makes admission failures final, as in the real kubelet,
	// and makes the kubelet hold the pods it admits (see admissible).
	failPods bool
	// failed are the pods whose admission failed: never admitted again.
	failed map[types.UID]bool
	// log, when set, gets a line per Allocate call and per pod failed.
	log io.Writer
}

// SetLog makes the kubelet write a line for every Allocate call (the pod
// it admitted and the answer) and every pod it fails, to w; nil stops it.
// The kubelet's Allocate names no pod, so this is the only record of which
// admission got which answer.
func (k *FakeKubelet) SetLog(w io.Writer) {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	k.faults.log = w
}

func (f *kubeletFaults) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.log != nil {
		fmt.Fprintf(f.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000000")}, args...)...)
	}
}

// logAllocate records one Allocate call for the pod's container.
func (f *kubeletFaults) logAllocate(pod *v1.Pod, ca ContainerAllocation, err error) {
	if err != nil {
		f.logf("allocate %s/%s uid=%s container=%s ids=%v: %v", pod.Namespace, pod.Name, pod.UID, ca.Container, ca.DeviceIDs, err)
		return
	}
	var limits []string
	for i := 0; ; i++ {
		v, ok := ca.Envs[fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT_%d", i)]
		if !ok {
			break
		}
		limits = append(limits, v)
	}
	f.logf("allocate %s/%s uid=%s container=%s ids=%v: visible=%s memory=%v sm=%s", pod.Namespace, pod.Name, pod.UID, ca.Container,
		ca.DeviceIDs, ca.Envs["NVIDIA_VISIBLE_DEVICES"], limits, ca.Envs["CUDA_DEVICE_SM_LIMIT"])
}

// SetBeforeAllocate installs f to run right before each Allocate call the
// kubelet makes, with the UID of the pod being admitted; nil removes it. The
// fault campaign kills the node agent from it.
func (k *FakeKubelet) SetBeforeAllocate(f func(pod types.UID)) {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	k.faults.before = f
}

// SetFailPodsOnAdmissionError makes the kubelet admit pods like the real
// one. It takes a pod for admission with a finalizer (AdmissionFinalizer),
// so that a deletion waits until the kubelet is done with the pod and the
// kubelet then deletes it, as a kubelet confirms a graceful deletion (kwok
// alone would delete it at once, a force deletion in the middle of the
// admission); a pod already being deleted is not admitted. When Allocate
// fails, the pod is marked Failed with reason UnexpectedAdmissionError and
// never asked for again.
func (k *FakeKubelet) SetFailPodsOnAdmissionError(on bool) {
	k.faults.mu.Lock()
	defer k.faults.mu.Unlock()
	k.faults.failPods = on
}

func (f *kubeletFaults) beforeAllocate(uid types.UID) {
	f.mu.Lock()
	hook := f.before
	f.mu.Unlock()
	if hook != nil {
		hook(uid)
	}
}

// admissionFailed reports whether an Allocate error ends the pod's
// admission; if so, the pod is marked Failed in the background.
func (k *FakeKubelet) admissionFailed(ctx context.Context, pod *v1.Pod, err error) bool {
	k.faults.mu.Lock()
	on := k.faults.failPods
	k.faults.mu.Unlock()
	if !on {
		return false
	}
	k.faults.mu.Lock()
	if k.faults.failed == nil {
		k.faults.failed = map[types.UID]bool{}
	}
	k.faults.failed[pod.UID] = true
	k.faults.mu.Unlock()
	k.wg.Add(1) // the pod worker holds the group, so it is not waited on yet
	go func() {
		defer k.wg.Done()
		k.failPod(ctx, pod.Namespace, pod.Name, pod.UID, err)
	}()
	return true
}

// AdmissionFinalizer is the finalizer the fault campaign's fake kubelets
// hold the pods they admit with.
const AdmissionFinalizer = "e2e.vshare.io/kubelet"

// admissible reports whether the kubelet still admits the pod: always,
// unless SetFailPodsOnAdmissionError is on; then only if its admission never
// failed and the kubelet could take it with AdmissionFinalizer (the API
// server refuses a new finalizer on a pod being deleted).
func (k *FakeKubelet) admissible(ctx context.Context, pod *v1.Pod) bool {
	k.faults.mu.Lock()
	on, failed := k.faults.failPods, k.faults.failed[pod.UID]
	k.faults.mu.Unlock()
	if !on {
		return true
	}
	if failed {
		return false
	}
	if slices.Contains(pod.Finalizers, AdmissionFinalizer) {
		return true // held since an earlier attempt: a deletion waits for us
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID, "finalizers": []string{AdmissionFinalizer}}})
	cur, err := k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		k.faults.logf("not admitting %s/%s uid=%s: %v", pod.Namespace, pod.Name, pod.UID, err)
		return false
	}
	if cur.DeletionTimestamp != nil || cur.Status.Phase == v1.PodFailed || cur.Status.Phase == v1.PodSucceeded {
		k.faults.logf("not admitting %s/%s uid=%s: deleting=%t phase=%s", pod.Namespace, pod.Name, pod.UID, cur.DeletionTimestamp != nil, cur.Status.Phase)
		return false
	}
	return true
}

// finalize lets a pod being deleted go once the kubelet is done with it:
// it removes AdmissionFinalizer and deletes the pod at once, as a kubelet
// does at the end of a graceful deletion. The pod worker calls it for each
// pod event, after any admission of the pod it was in.
func (k *FakeKubelet) finalize(ctx context.Context, pod *v1.Pod) {
	if pod.DeletionTimestamp == nil || !slices.Contains(pod.Finalizers, AdmissionFinalizer) {
		return
	}
	pods := k.client.CoreV1().Pods(pod.Namespace)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID, "$deleteFromPrimitiveList/finalizers": []string{AdmissionFinalizer}}})
	if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		k.faults.logf("release %s/%s uid=%s: %v", pod.Namespace, pod.Name, pod.UID, err)
		return
	}
	grace := int64(0)
	_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
}

// failPod sets the pod's phase to Failed as the kubelet does on an admission
// error (its containers never start). kwok's ready stage does not start a
// Failed pod, but one it was already starting may land after this write and
// set the pod Running, so the pod is read again until it is seen Failed.
func (k *FakeKubelet) failPod(ctx context.Context, namespace, name string, uid types.UID, cause error) {
	msg := fmt.Sprintf("Allocate failed due to %v, which is unexpected", cause)
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := k.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			return apierrors.IsNotFound(err), nil
		case pod.UID != uid || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded:
			return true, nil
		}
		pod.Status.Phase = v1.PodFailed
		pod.Status.Reason = ReasonUnexpectedAdmissionError
		pod.Status.Message = msg
		_, err = k.client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			k.faults.logf("failed %s/%s uid=%s: %s", namespace, name, uid, msg)
		}
		return false, nil // seen Failed at the next read
	})
}

// RecreateSocket does what a kubelet restart does to the device-plugin
// directory: it stops serving kubelet.sock, drops the plugin's connection,
// and serves a new kubelet.sock at the same path. The agent must notice and
// register again (Registrations grows).
func (k *FakeKubelet) RecreateSocket() error {
	k.mu.Lock()
	old := k.server
	if k.stopStream != nil {
		k.stopStream()
		k.conn.Close()
	}
	k.conn, k.stopStream = nil, nil
	k.mu.Unlock()
	old.Stop() // closes the listener, which removes the socket file
	path := filepath.Join(k.dir, "kubelet.sock")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s again: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{k})
	k.mu.Lock()
	k.server = srv
	k.mu.Unlock()
	k.wg.Add(1)
	go func() { defer k.wg.Done(); _ = srv.Serve(lis) }()
	return nil
}
