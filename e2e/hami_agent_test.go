//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// hamiAgent is a node agent of another vendor: a stand-in for HAMi's NVIDIA
// device plugin, written from HAMi's source (Project-HAMi/HAMi) and reading
// only hami.io/* and the pod spec, never volcano.sh/* and never this
// project's protocol packages, so that it checks our scheduler against
// HAMi's protocol rather than against our own reading of it. What it does,
// and where HAMi does it:
//
//   - registers the node: hami.io/node-nvidia-register, the JSON list of
//     DeviceInfo (pkg/device/devices.go MarshalNodeDevices, omitempty
//     fields; pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go
//     RegisterInAnnotation), and, as plugins before the handshake was
//     dropped did, hami.io/node-handshake "Reported <time>";
//   - advertises deviceSplitCount replicas per card to the kubelet, as
//     "<UUID>::<i>" (nvinternal/rm, AnnotatedID);
//   - Allocate (nvinternal/plugin/server.go Allocate, util.go): finds the
//     pending pod (pkg/util/util.go GetPendingPod: with lockFirst, the pod
//     hami.io/mutex.lock names, as since HAMi PR #451; else, or when the
//     lock names none, the first pod on the node with hami.io/bind-time,
//     hami.io/bind-phase allocating and hami.io/vgpu-node = the node),
//     takes the first entry of hami.io/vgpu-devices-to-allocate with cards
//     (GetNextDeviceRequest; entries index init containers first), refuses
//     a card count other than the kubelet's, answers with
//     NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i> and
//     CUDA_DEVICE_SM_LIMIT, empties the entry (eraseNextDeviceTypeFromAnnotation,
//     EncodePodSingleDevice: "UUID,type,mem,cores:" per card, ";" after
//     every entry), and once no NVIDIA card is left sets hami.io/bind-phase
//     success and removes hami.io/mutex.lock if it ends with
//     ",<namespace>,<pod>" (PodAllocationTrySuccess, pkg/util/nodelock
//     ReleaseNodeLock); on an error bind-phase failed, lock removed
//     (PodAllocationFailed).
type hamiAgent struct {
	pluginapi.UnimplementedDevicePluginServer

	node, dir, resource string
	cards               []hamiCard
	split               int
	lockFirst           bool
	kube                kubernetes.Interface
	server              *grpc.Server

	mu     sync.Mutex
	served []hamiServed
	errs   []string
}

// hamiCard is one simulated card.
type hamiCard struct {
	uuid   string
	memMiB int
}

// hamiServed is one Allocate the agent answered.
type hamiServed struct {
	pod     string // namespace/name
	foundBy string // "lock" or "scan"
	uuids   []string
}

// Keys the agent reads and writes, spelled out here as HAMi does (pkg/util
// types.go, pkg/device/nvidia/device.go, pkg/util/nodelock).
const (
	hamiRegisterKey  = "hami.io/node-nvidia-register"
	hamiHandshakeKey = "hami.io/node-handshake"
	hamiToAllocate   = "hami.io/vgpu-devices-to-allocate"
	hamiAssignedNode = "hami.io/vgpu-node"
	hamiBindPhase    = "hami.io/bind-phase"
	hamiBindTime     = "hami.io/bind-time"
	hamiNodeLock     = "hami.io/mutex.lock"
)

// startHAMiAgent registers the node's cards, serves the device-plugin API
// in dir and registers resource with the kubelet socket there.
func startHAMiAgent(ctx context.Context, kube kubernetes.Interface, node, dir, resource string, cards []hamiCard, lockFirst bool) (*hamiAgent, error) {
	a := &hamiAgent{node: node, dir: dir, resource: resource, cards: cards, split: 10, lockFirst: lockFirst, kube: kube,
		server: grpc.NewServer()}
	if err := a.register(ctx); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "hami-nvidia.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	pluginapi.RegisterDevicePluginServer(a.server, a)
	go func() { _ = a.server.Serve(lis) }()
	conn, err := grpc.Dial("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		a.server.Stop()
		return nil, fmt.Errorf("dial the kubelet: %w", err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(sock), ResourceName: resource,
	})
	if err != nil {
		a.server.Stop()
		return nil, fmt.Errorf("register %s with the kubelet: %w", resource, err)
	}
	return a, nil
}

func (a *hamiAgent) stop() { a.server.Stop() }

// register writes the registration as RegisterInAnnotation does (merge
// patch of the node's annotations).
func (a *hamiAgent) register(ctx context.Context) error {
	type deviceInfo struct { // pkg/device/devices.go DeviceInfo, the fields MarshalNodeDevices keeps
		ID      string `json:"id,omitempty"`
		Index   uint   `json:"index,omitempty"`
		Count   int32  `json:"count,omitempty"`
		Devmem  int32  `json:"devmem,omitempty"`
		Devcore int32  `json:"devcore,omitempty"`
		Type    string `json:"type,omitempty"`
		Numa    int    `json:"numa,omitempty"`
		Mode    string `json:"mode,omitempty"`
		Health  bool   `json:"health,omitempty"`
	}
	devs := make([]deviceInfo, len(a.cards))
	for i, c := range a.cards {
		devs[i] = deviceInfo{ID: c.uuid, Index: uint(i), Count: int32(a.split), Devmem: int32(c.memMiB), Devcore: 100,
			Type: "NVIDIA-NVIDIA A10", Mode: "hami-core", Health: true}
	}
	reg, err := json.Marshal(devs)
	if err != nil {
		return err
	}
	return a.patchNode(ctx, map[string]any{hamiRegisterKey: string(reg), hamiHandshakeKey: "Reported " + time.Now().Format(time.DateTime)})
}

func (a *hamiAgent) patchNode(ctx context.Context, annotations map[string]any) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	_, err := a.kube.CoreV1().Nodes().Patch(ctx, a.node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (a *hamiAgent) patchPod(ctx context.Context, pod *v1.Pod, annotations map[string]string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	_, err := a.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (a *hamiAgent) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the replicas once and keeps the stream open.
func (a *hamiAgent) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	var devs []*pluginapi.Device
	for _, c := range a.cards {
		for i := 0; i < a.split; i++ {
			devs = append(devs, &pluginapi.Device{ID: c.uuid + "::" + strconv.Itoa(i), Health: pluginapi.Healthy})
		}
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// hamiDevice is one card of an allocation entry (ContainerDevice).
type hamiDevice struct {
	uuid, typ        string
	usedmem, usedcor int
}

// hamiDecodeEntries reads a devices annotation as HAMi v2.9's DecodePodDevices:
// one entry per ";"-separated slot, empty slots kept; the empty slot after
// the last ";" too, which never has cards.
func hamiDecodeEntries(value string) ([][]hamiDevice, error) {
	var out [][]hamiDevice
	for _, slot := range strings.Split(value, ";") {
		var ctr []hamiDevice
		for _, d := range strings.Split(slot, ":") {
			if d == "" {
				continue
			}
			f := strings.Split(d, ",")
			if len(f) < 4 || f[0] == "" || f[1] == "" {
				return nil, fmt.Errorf("pod annotation format error in %q", d)
			}
			mem, err1 := strconv.Atoi(f[2])
			cores, err2 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2); err != nil || mem < 0 || cores < 0 {
				return nil, fmt.Errorf("pod annotation format error in %q: %v", d, err)
			}
			ctr = append(ctr, hamiDevice{uuid: f[0], typ: f[1], usedmem: mem, usedcor: cores})
		}
		out = append(out, ctr)
	}
	return out, nil
}

// hamiEncodeEntries is EncodePodSingleDevice.
func hamiEncodeEntries(entries [][]hamiDevice) string {
	var b strings.Builder
	for _, ctr := range entries {
		for _, d := range ctr {
			fmt.Fprintf(&b, "%s,%s,%d,%d:", d.uuid, d.typ, d.usedmem, d.usedcor)
		}
		b.WriteString(";")
	}
	return b.String()
}

// pendingPod is GetPendingPod.
func (a *hamiAgent) pendingPod(ctx context.Context) (*v1.Pod, string, error) {
	if a.lockFirst {
		node, err := a.kube.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		if value, ok := node.Annotations[hamiNodeLock]; ok && strings.Contains(value, ",") {
			s := strings.Split(value, ",")
			if len(s) != 3 {
				return nil, "", fmt.Errorf("malformed lock annotation %q", value)
			}
			pod, err := a.kube.CoreV1().Pods(s[1]).Get(ctx, s[2], metav1.GetOptions{})
			return pod, "lock", err
		}
	}
	pods, err := a.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.node})
	if err != nil {
		return nil, "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, ok := p.Annotations[hamiBindTime]; !ok {
			continue
		}
		if p.Annotations[hamiBindPhase] != "allocating" || p.Annotations[hamiAssignedNode] != a.node {
			continue
		}
		return p, "scan", nil
	}
	return nil, "", fmt.Errorf("no binding pod found on node %s", a.node)
}

// Allocate serves one kubelet call.
func (a *hamiAgent) Allocate(ctx context.Context, reqs *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	pod, foundBy, err := a.pendingPod(ctx)
	if err != nil {
		a.fail(nil, err)
		return nil, err
	}
	resp := &pluginapi.AllocateResponse{}
	for _, req := range reqs.ContainerRequests {
		entries, err := hamiDecodeEntries(pod.Annotations[hamiToAllocate])
		if err != nil {
			return nil, a.fail(pod, err)
		}
		next := -1
		for i, e := range entries {
			if len(e) > 0 {
				next = i
				break
			}
		}
		if next < 0 || next >= len(pod.Spec.InitContainers)+len(pod.Spec.Containers) {
			return nil, a.fail(pod, errors.New("device request not found"))
		}
		devreq := entries[next]
		if len(devreq) != len(req.DevicesIDs) {
			return nil, a.fail(pod, errors.New("device number not matched"))
		}
		envs := map[string]string{"CUDA_DEVICE_SM_LIMIT": strconv.Itoa(devreq[0].usedcor)}
		var uuids []string
		for i, d := range devreq {
			uuids = append(uuids, d.uuid)
			envs["CUDA_DEVICE_MEMORY_LIMIT_"+strconv.Itoa(i)] = strconv.Itoa(d.usedmem) + "m"
		}
		envs["NVIDIA_VISIBLE_DEVICES"] = strings.Join(uuids, ",")
		entries[next] = nil // v2.9 keeps every slot, the empty one after the last ";" too
		erased := hamiEncodeEntries(entries)
		if err := a.patchPod(ctx, pod, map[string]string{hamiToAllocate: erased}); err != nil {
			return nil, a.fail(pod, err)
		}
		pod.Annotations[hamiToAllocate] = erased
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: envs})
		a.mu.Lock()
		a.served = append(a.served, hamiServed{pod: pod.Namespace + "/" + pod.Name, foundBy: foundBy, uuids: uuids})
		a.mu.Unlock()
	}
	a.trySuccess(ctx, pod)
	return resp, nil
}

// trySuccess is PodAllocationTrySuccess.
func (a *hamiAgent) trySuccess(ctx context.Context, pod *v1.Pod) {
	cur, err := a.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || strings.Contains(cur.Annotations[hamiToAllocate], "NVIDIA") {
		return
	}
	a.finish(ctx, pod, "success")
}

// fail is PodAllocationFailed; it returns err.
func (a *hamiAgent) fail(pod *v1.Pod, err error) error {
	a.mu.Lock()
	a.errs = append(a.errs, err.Error())
	a.mu.Unlock()
	if pod != nil {
		a.finish(context.Background(), pod, "failed")
	}
	return err
}

// finish sets the bind phase and releases the lock if the pod holds it.
func (a *hamiAgent) finish(ctx context.Context, pod *v1.Pod, phase string) {
	if err := a.patchPod(ctx, pod, map[string]string{hamiBindPhase: phase}); err != nil {
		a.mu.Lock()
		a.errs = append(a.errs, err.Error())
		a.mu.Unlock()
		return
	}
	node, err := a.kube.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		return
	}
	if lock, ok := node.Annotations[hamiNodeLock]; ok && strings.HasSuffix(lock, ","+pod.Namespace+","+pod.Name) {
		_ = a.patchNode(ctx, map[string]any{hamiNodeLock: nil})
	}
}

// report returns what the agent served and the errors it answered with.
func (a *hamiAgent) report() ([]hamiServed, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]hamiServed(nil), a.served...), append([]string(nil), a.errs...)
}
