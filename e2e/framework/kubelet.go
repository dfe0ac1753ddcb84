//go:build e2e

package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
)

// maxAllocateAttempts bounds the fake kubelet's retries of one pod. The
// real kubelet admits a pod once; the agent's pod informer may lag the
// kubelet's by a moment on a loaded test machine, and a flaky failure there
// says nothing about the code under test. Every attempt is recorded.
const maxAllocateAttempts = 8

// ContainerAllocation is what the fake kubelet got for one container.
type ContainerAllocation struct {
	Container string
	// Init is set for an init container, Sidecar also for a native sidecar
	// (an init container with restartPolicy Always).
	Init, Sidecar bool
	DeviceIDs     []string
	// Reused are the DeviceIDs taken from the pod's reusable devices (an
	// earlier regular init container's; see reusable), which the
	// GetPreferredAllocation request named must-include. Preferred is not
	// asked when they are all the container asks for.
	Reused []string
	// Preferred is the plugin's GetPreferredAllocation answer (nil when the
	// plugin does not offer it or was not asked), and PreferredErr why the
	// real kubelet would not take it whole (see preferDevices); empty when
	// it would.
	Preferred    []string
	PreferredErr string
	Envs         map[string]string
	Mounts       []string // host:container
	Devices      []string // device nodes (host paths) the answer names
	Attempts     int
	Errors       []string // failed attempts, oldest first
	Err          string   // the last error, when no attempt succeeded yet
}

// PodAllocation is what the fake kubelet got for one pod.
type PodAllocation struct {
	Namespace, Name string
	UID             types.UID
	Containers      []ContainerAllocation
}

// FakeKubelet plays the kubelet's device-manager part for one node: it serves
// the Registration service on <dir>/kubelet.sock, runs ListAndWatch against
// the registered plugin, advertises the healthy device count as the node's
// capacity, and calls Allocate for every container of every pod bound to the
// node that requests the plugin's resource, one container per call, with
// device IDs it picked from those not in use, as the kubelet does.
//
// It admits a pod's containers as the kubelet v1.30 does
// (k8s.io/kubernetes pkg/kubelet/cm/devicemanager manager.go; the rules are
// docs/architecture.md's "Init containers and sidecars"):
//
//  1. Order: init containers (native sidecars among them) in spec order,
//     then regular containers in spec order (topologymanager scope Admit,
//     admitPolicyNone: append(InitContainers, Containers...)); one
//     Allocate per container asking for the resource, stopping at the
//     first failure.
//  2. Devices: first the pod's reusable devices (devicesToAllocate,
//     allocateRemainingFrom(reusableDevices)); when they cover the request
//     neither GetPreferredAllocation nor any free device is involved.
//     Otherwise GetPreferredAllocation is asked with the free devices plus
//     the reused ones as available, the reused ones as must-include and the
//     container's whole count as size (callGetPreferredAllocationIfAvailable),
//     and the rest taken from its answer, then from the free devices.
//  3. Reuse: after a regular init container its devices join the pod's
//     reusable devices (Allocate: addContainerAllocatedResources); after a
//     sidecar or a regular container the devices it got leave them
//     (removeContainerAllocatedResources), so no two of those share one.
//  4. An init container's devices stay allocated to the pod after it exits,
//     until the pod is gone (podDevices keeps every container's entry;
//     UpdateAllocatedDevices frees only pods no longer active): here, until
//     the pod is deleted.
//
// Where the kubelet leaves a choice to a Go map's order (which reusable
// devices a container asking for fewer gets, which of a too long preferred
// answer), this one takes the lowest device IDs or the answer's order.
type FakeKubelet struct {
	node   string
	dir    string
	client kubernetes.Interface
	server *grpc.Server
	queue  workqueue.RateLimitingInterface
	pods   cache.Indexer
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	resource string
	conn     *grpc.ClientConn
	// preferred is the plugin's GetPreferredAllocationAvailable, read from
	// GetDevicePluginOptions when it connects, as the kubelet does.
	preferred  bool
	stopStream context.CancelFunc
	devices    []*pluginapi.Device
	used       map[string]types.UID // device ID -> pod holding it
	results    map[types.UID]*PodAllocation
	registered chan struct{}
	// registrations counts the plugin registrations served.
	registrations int
	// faults are the fault campaign's hooks (faults_kubelet.go); the zero
	// value changes nothing.
	faults kubeletFaults
	// delay is added before every Allocate call (SetAllocateDelay).
	delay time.Duration
}

// SetAllocateDelay makes every Allocate call start d later, after
// GetPreferredAllocation: a node agent whose round trip is d slower, as
// the kubelet sees it (its admission waits) and as the scheduler sees it
// (the pod is served d later). The benchmark's slow-agent curve uses it.
func (k *FakeKubelet) SetAllocateDelay(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.delay = d
}

// StartFakeKubelet serves kubelet.sock in socketDir and watches the pods
// bound to node.
func StartFakeKubelet(ctx context.Context, node, socketDir string, client kubernetes.Interface) (*FakeKubelet, error) {
	path := filepath.Join(socketDir, "kubelet.sock") // pluginapi.KubeletSocket is the full default path
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &FakeKubelet{
		node: node, dir: socketDir, client: client, cancel: cancel,
		server:     grpc.NewServer(),
		queue:      workqueue.NewRateLimitingQueue(workqueue.NewItemExponentialFailureRateLimiter(50*time.Millisecond, 2*time.Second)),
		used:       map[string]types.UID{},
		results:    map[types.UID]*PodAllocation{},
		registered: make(chan struct{}),
	}
	pluginapi.RegisterRegistrationServer(k.server, registration{k})
	k.wg.Add(1)
	go func() { defer k.wg.Done(); _ = k.server.Serve(lis) }()

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: k.release,
	}); err != nil {
		k.Stop()
		return nil, fmt.Errorf("watch pods of %s: %w", node, err)
	}
	k.pods = inf.GetIndexer()
	factory.Start(ctx.Done())
	k.wg.Add(1)
	go func() { defer k.wg.Done(); k.work(ctx) }()
	return k, nil
}

// Stop stops serving, the plugin stream and the pod worker.
func (k *FakeKubelet) Stop() {
	k.cancel()
	k.queue.ShutDown()
	k.mu.Lock()
	server := k.server // RecreateSocket replaces it
	k.mu.Unlock()
	server.Stop()
	k.mu.Lock()
	if k.stopStream != nil {
		k.stopStream()
	}
	if k.conn != nil {
		k.conn.Close()
	}
	k.mu.Unlock()
	k.wg.Wait()
}

// Resource is the extended resource the registered plugin serves ("" until
// one registers).
func (k *FakeKubelet) Resource() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.resource
}

// Registrations counts the plugin registrations so far (an agent that
// restarts registers again).
func (k *FakeKubelet) Registrations() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.registrations
}

// Registered is closed once a plugin has registered.
func (k *FakeKubelet) Registered() <-chan struct{} { return k.registered }

// Devices returns the devices of the last ListAndWatch response.
func (k *FakeKubelet) Devices() []*pluginapi.Device {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.devices)
}

// Allocation returns what Allocate returned for the pod, once every
// container requesting the resource has an answer (or failed for good).
func (k *FakeKubelet) Allocation(uid types.UID) (PodAllocation, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.results[uid]
	if !ok {
		return PodAllocation{}, false
	}
	c := *a
	c.Containers = slices.Clone(a.Containers)
	for i := range c.Containers {
		c.Containers[i].Errors = slices.Clone(c.Containers[i].Errors)
	}
	return c, true
}

type registration struct{ k *FakeKubelet }

func (r registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported device-plugin API version %q, want %q", req.Version, pluginapi.Version)
	}
	go r.k.connect(req.ResourceName, req.Endpoint) // the kubelet also answers first
	return &pluginapi.Empty{}, nil
}

// connect dials the plugin and follows ListAndWatch until the stream ends;
// a new registration replaces the previous connection.
func (k *FakeKubelet) connect(resource, endpoint string) {
	conn, err := grpc.Dial("unix://"+filepath.Join(k.dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials())) // grpc is pinned to v1.57: no NewClient
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The kubelet reads the plugin's options when it connects
	// (pkg/kubelet/cm/devicemanager/manager.go, PluginConnected) and fails
	// the connection when it cannot.
	octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
	opts, err := pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(octx, &pluginapi.Empty{})
	ocancel()
	if err != nil {
		cancel()
		conn.Close()
		return
	}
	k.mu.Lock()
	if k.stopStream != nil {
		k.stopStream()
		k.conn.Close()
	}
	k.resource, k.conn, k.stopStream, k.preferred = resource, conn, cancel, opts.GetPreferredAllocationAvailable
	k.registrations++
	select {
	case <-k.registered:
	default:
		close(k.registered)
	}
	k.mu.Unlock()

	stream, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		k.mu.Lock()
		k.devices = resp.Devices
		k.mu.Unlock()
		healthy := 0
		for _, d := range resp.Devices {
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		_ = k.patchCapacity(ctx, resource, healthy) // retried on the next update; the test waits on the node
	}
}

// patchCapacity sets the node's capacity and allocatable of resource.
func (k *FakeKubelet) patchCapacity(ctx context.Context, resource string, n int) error {
	q := fmt.Sprint(n)
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"capacity": map[string]string{resource: q}, "allocatable": map[string]string{resource: q},
	}})
	_, err := k.client.CoreV1().Nodes().Patch(ctx, k.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch capacity of node %s: %w", k.node, err)
	}
	return nil
}

func (k *FakeKubelet) work(ctx context.Context) {
	for {
		item, quit := k.queue.Get()
		if quit {
			return
		}
		key := item.(string)
		retry := k.admit(ctx, key)
		if retry && k.queue.NumRequeues(key) < maxAllocateAttempts-1 {
			k.queue.AddRateLimited(key)
		} else {
			k.queue.Forget(key)
		}
		k.queue.Done(key)
	}
}

// admit allocates devices for the pod's containers that have none yet. It
// returns true when a later attempt may succeed.
func (k *FakeKubelet) admit(ctx context.Context, key string) bool {
	obj, exists, err := k.pods.GetByKey(key)
	if err != nil || !exists {
		return false
	}
	pod := obj.(*v1.Pod)
	k.finalize(ctx, pod)
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	k.mu.Lock()
	resource, client := k.resource, k.conn
	rec, seen := k.results[pod.UID]
	k.mu.Unlock()
	if resource == "" || client == nil {
		return true // no plugin yet
	}
	if !k.admissible(ctx, pod) {
		return false
	}
	if !seen {
		rec = &PodAllocation{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Containers: admissionOrder(pod, resource)}
		if len(rec.Containers) == 0 {
			return false
		}
		k.mu.Lock()
		k.results[pod.UID] = rec
		k.mu.Unlock()
	}
	retry := false
	for i := range rec.Containers {
		k.mu.Lock()
		ca := rec.Containers[i]
		reusable := reusable(rec.Containers[:i])
		k.mu.Unlock()
		if ca.Envs != nil {
			continue
		}
		c := containerByName(pod, ca.Container)
		if c == nil {
			continue
		}
		ca.Attempts++
		var resp *pluginapi.ContainerAllocateResponse
		var got allocated
		got, resp, err = k.allocate(ctx, client, pod.UID, requested(*c, resource), reusable)
		ca.DeviceIDs, ca.Reused, ca.Preferred, ca.PreferredErr = got.ids, got.reused, got.pref, got.prefErr
		ca.Envs, ca.Mounts, ca.Devices = answer(resp)
		k.faults.logAllocate(pod, ca, err)
		ca.Err = ""
		if err != nil {
			ca.Err = err.Error()
			ca.Errors = append(slices.Clip(ca.Errors), ca.Err)
			retry = !k.admissionFailed(ctx, pod, err)
		}
		k.mu.Lock()
		rec.Containers[i] = ca
		k.mu.Unlock()
		if err != nil {
			break // containers are admitted in order
		}
	}
	return retry
}

// answer is what the kubelet takes from an Allocate answer into the
// container: environment, mounts (host:container), device nodes.
func answer(r *pluginapi.ContainerAllocateResponse) (map[string]string, []string, []string) {
	if r == nil {
		return nil, nil, nil
	}
	envs := r.Envs
	if envs == nil {
		envs = map[string]string{}
	}
	var mounts, devices []string
	for _, m := range r.Mounts {
		mounts = append(mounts, m.HostPath+":"+m.ContainerPath)
	}
	for _, d := range r.Devices {
		devices = append(devices, d.HostPath)
	}
	return envs, mounts, devices
}

// admissionOrder lists the pod's containers asking for resource in the
// order the kubelet admits them: init containers, then regular ones.
func admissionOrder(pod *v1.Pod, resource string) []ContainerAllocation {
	var out []ContainerAllocation
	for _, c := range pod.Spec.InitContainers {
		if requested(c, resource) > 0 {
			sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
			out = append(out, ContainerAllocation{Container: c.Name, Init: true, Sidecar: sidecar})
		}
	}
	for _, c := range pod.Spec.Containers {
		if requested(c, resource) > 0 {
			out = append(out, ContainerAllocation{Container: c.Name})
		}
	}
	return out
}

// reusable returns the pod's reusable devices once the containers admitted
// before (done, in admission order) have their devices, sorted: a regular
// init container's devices join them, a sidecar's or a regular
// container's leave them (manager.go, Allocate).
func reusable(done []ContainerAllocation) []string {
	var out []string
	for _, ca := range done {
		if ca.Init && !ca.Sidecar {
			for _, id := range ca.DeviceIDs {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
			continue
		}
		out = slices.DeleteFunc(out, func(id string) bool { return slices.Contains(ca.DeviceIDs, id) })
	}
	slices.Sort(out)
	return out
}

// allocated is what allocate picked for a container: its devices, those of
// them reused, the plugin's preference and why that was not usable whole.
type allocated struct {
	ids, reused, pref []string
	prefErr           string
}

// allocate picks n devices and calls Allocate for them: the reusable ones
// first, then free healthy ones. When the plugin offers
// GetPreferredAllocation and the reusable devices do not cover the request
// it is asked first, with the free and the reused devices available and the
// reused ones must-include, and its answer taken as the kubelet takes it
// (preferDevices). Where the kubelet picks out of a set (manager.go,
// devicesToAllocate: reusable and available devices are sets, their
// UnsortedList in Go's map order), so does this one, in random order: the
// real kubelet's picks differ from run to run (the real-node comparison,
// e2e/realnode/kubelet_test.go, saw p3, p0, p1 for the same first pod).
func (k *FakeKubelet) allocate(ctx context.Context, conn *grpc.ClientConn, uid types.UID, n int, reusable []string) (got allocated, _ *pluginapi.ContainerAllocateResponse, _ error) {
	reusable = slices.Clone(reusable)
	rand.Shuffle(len(reusable), func(i, j int) { reusable[i], reusable[j] = reusable[j], reusable[i] })
	got.reused = reusable[:min(n, len(reusable))]
	k.mu.Lock()
	var free []string
	for _, d := range k.devices {
		if _, taken := k.used[d.ID]; !taken && d.Health == pluginapi.Healthy {
			free = append(free, d.ID)
		}
	}
	preferred, delay := k.preferred, k.delay
	k.mu.Unlock()
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	need := n - len(got.reused)
	// The kubelet asks nothing of the plugin when too few are free
	// (manager.go, devicesToAllocate: "requested number of devices unavailable").
	if len(free) < need {
		return got, nil, fmt.Errorf("%d free devices, want %d", len(free), need)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	got.ids = append(slices.Clone(got.reused), free[:need]...)
	if preferred && need > 0 {
		available := append(slices.Clone(free), got.reused...)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := client.GetPreferredAllocation(pctx, &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: available, MustIncludeDeviceIDs: got.reused, AllocationSize: int32(n)}},
		})
		cancel()
		if err != nil {
			// An error fails the container's admission (manager.go,
			// callGetPreferredAllocationIfAvailable).
			return got, nil, fmt.Errorf("plugin GetPreferredAllocation: %w", err)
		}
		if len(resp.ContainerResponses) > 0 {
			got.pref = resp.ContainerResponses[0].DeviceIDs
		}
		if err := deviceplugin.CheckPreferred(available, got.reused, n, got.pref); err != nil {
			got.prefErr = err.Error()
		}
		got.ids = append(slices.Clone(got.reused), preferDevices(free, got.pref, need)...)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return got, nil, ctx.Err()
		}
	}
	k.faults.beforeAllocate(uid)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: got.ids}},
	})
	if err != nil {
		return got, nil, fmt.Errorf("plugin Allocate(%v): %w", got.ids, err)
	}
	if len(resp.ContainerResponses) != 1 {
		return got, nil, fmt.Errorf("plugin Allocate(%v): %d container responses, want 1", got.ids, len(resp.ContainerResponses))
	}
	k.mu.Lock()
	for _, id := range got.ids {
		k.used[id] = uid
	}
	k.mu.Unlock()
	return got, resp.ContainerResponses[0], nil
}

// preferDevices is what the kubelet's devicemanager allocates from a
// preferred answer (manager.go, devicesToAllocate): the preferred devices
// that are available, up to n (the kubelet walks a set, so which ones of a
// too long answer is unspecified; here the answer's order), then the rest
// from the other available devices (free, in the caller's random order).
func preferDevices(free, pref []string, n int) []string {
	avail := map[string]bool{}
	for _, id := range free {
		avail[id] = true
	}
	var out []string
	for _, id := range pref {
		if len(out) < n && avail[id] && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	for _, id := range free {
		if len(out) < n && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// release frees the devices of a deleted pod.
func (k *FakeKubelet) release(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, uid := range k.used {
		if uid == pod.UID {
			delete(k.used, id)
		}
	}
}

func requested(c v1.Container, resource string) int {
	q, ok := c.Resources.Limits[v1.ResourceName(resource)]
	if !ok {
		q, ok = c.Resources.Requests[v1.ResourceName(resource)]
	}
	if !ok {
		return 0
	}
	return int(q.Value())
}

func containerByName(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
