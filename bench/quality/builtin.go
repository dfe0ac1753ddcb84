package quality

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"volcano.sh/volcano/pkg/scheduler/api/devices"
	bvgpu "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu"

	"github.com/vgpushare/vshare/deviceshare/volcano"
)

// Volcano v1.10.0's built-in vGPU device, driven as Volcano's deviceshare
// plugin drives it, under each of its deviceshare.SchedulePolicy values.
const (
	// PolicyBuiltin is the built-in with no SchedulePolicy: its device
	// score is 0 on every node.
	PolicyBuiltin = "volcano-builtin"
	// PolicyBuiltinBinpack and PolicyBuiltinSpread take the built-in's
	// ScoreNode under "binpack" and "spread" as the node score.
	PolicyBuiltinBinpack = "volcano-builtin-binpack"
	PolicyBuiltinSpread  = "volcano-builtin-spread"
)

// BuiltinPolicies returns the policies placed through Volcano's built-in
// vGPU device code.
func BuiltinPolicies() []string {
	return []string{PolicyBuiltinBinpack, PolicyBuiltinSpread, PolicyBuiltin}
}

// builtinSchedulePolicy is the deviceshare.SchedulePolicy of a built-in
// policy name.
func builtinSchedulePolicy(name string) (string, bool) {
	switch name {
	case PolicyBuiltin:
		return "", true
	case PolicyBuiltinBinpack:
		return "binpack", true
	case PolicyBuiltinSpread:
		return "spread", true
	}
	return "", false
}

func builtin(name string) Factory {
	sp, ok := builtinSchedulePolicy(name)
	if !ok {
		return nil
	}
	return func(env Env) (Policy, error) { return newBuiltinPolicy(env.Trace, sp) }
}

// builtinMu serialises every call into the built-in code: it reads package
// globals (VGPUEnable, NodeLockEnable, its client) that withBuiltin sets
// for the call and restores afterwards.
var builtinMu sync.Mutex

// withBuiltin runs f with the built-in code configured as the deviceshare
// plugin configures it for "deviceshare.VGPUEnable: true" (NodeLockEnable
// left at its default, false), its API client the in-memory one, and its
// log silenced (it logs an error for every node a pod does not fit);
// everything is put back when f returns.
func withBuiltin(f func() error) error {
	builtinMu.Lock()
	defer builtinMu.Unlock()
	enable, lock, client := bvgpu.VGPUEnable, bvgpu.NodeLockEnable, volcano.BuiltinVGPUClient()
	bvgpu.VGPUEnable, bvgpu.NodeLockEnable = true, false
	volcano.SetBuiltinVGPUClient(builtinClient())
	klog.SetLogger(klog.Logger{}) // the zero logr.Logger discards
	defer func() {
		klog.ClearLogger()
		bvgpu.VGPUEnable, bvgpu.NodeLockEnable = enable, lock
		volcano.SetBuiltinVGPUClient(client)
	}()
	return f()
}

// builtinRuns numbers built-in policy instances: each places its pods in a
// namespace of its own, so that concurrent runs' pod PATCHes do not mix.
var builtinRuns atomic.Int64

// builtinPolicy places pods through the built-in device's FilterNode,
// ScoreNode and Allocate, and accounts each placed pod on its node's
// devices with AddResource from the annotations Allocate patched, as the
// scheduler cache does when the patched pod comes back from the API
// server. The simulator checks CPU and memory.
type builtinPolicy struct {
	// policy is the deviceshare.SchedulePolicy ("", "binpack", "spread").
	policy    string
	namespace string
	devs      []*bvgpu.GPUDevices
	// memo caches FilterNode and the node score per node and pod shape,
	// valid while the node's Version is unchanged.
	memo shapeMemo
	seq  int
}

func newBuiltinPolicy(t *Trace, policy string) (*builtinPolicy, error) {
	b := &builtinPolicy{policy: policy, namespace: "openb-builtin-" + strconv.FormatInt(builtinRuns.Add(1), 10),
		devs: make([]*bvgpu.GPUDevices, len(t.Nodes)), memo: newShapeMemo(len(t.Nodes))}
	err := withBuiltin(func() error {
		for i := range t.Nodes {
			// NewGPUDevices also answers the handshake (a node PATCH).
			d := bvgpu.NewGPUDevices(t.Nodes[i].Name, builtinNode(i, &t.Nodes[i]))
			if d == nil || len(d.Device) != t.Nodes[i].GPUs {
				return fmt.Errorf("built-in vGPU: decode node %s: %v", t.Nodes[i].Name, d)
			}
			b.devs[i] = d
		}
		return nil
	})
	return b, err
}

// builtinNode is the node as Volcano's vGPU device plugin registers it:
// "uuid,split count,memory MiB,type,healthy:" per card, the type starting
// with NVIDIA (the built-in only takes cards whose type contains it).
func builtinNode(i int, n *Node) *v1.Node {
	mem := cardMemMiB(n.Model)
	var reg strings.Builder
	for g := 0; g < n.GPUs; g++ {
		fmt.Fprintf(&reg, "%s,%d,%d,NVIDIA-%s,true:", cardUUID(i, g), splitCount, mem, n.Model)
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Annotations: map[string]string{
		bvgpu.VolcanoVGPURegister:  reg.String(),
		bvgpu.VolcanoVGPUHandshake: "Reported 2026-01-01 00:00:00",
	}}}
}

// builtinSnapshot copies the devices' accounting, as the scheduler
// session's copy of the node, for Allocate to change in place.
func builtinSnapshot(gs *bvgpu.GPUDevices) *bvgpu.GPUDevices {
	out := &bvgpu.GPUDevices{Name: gs.Name, Device: make(map[int]*bvgpu.GPUDevice, len(gs.Device))}
	for i, d := range gs.Device {
		c := *d
		out.Device[i] = &c
	}
	return out
}

func (b *builtinPolicy) Place(c *Cluster, p *Pod) (node int, cards []int, ok bool, err error) {
	err = withBuiltin(func() error {
		node, cards, ok, err = b.place(c, p)
		return err
	})
	return node, cards, ok, err
}

func (b *builtinPolicy) place(c *Cluster, p *Pod) (int, []int, bool, error) {
	b.seq++
	pod := vgpuPod(p, b.seq)
	pod.Namespace = b.namespace
	best := b.memo.best(c, p, 0, func(n int) (bool, float64) { return b.filterScore(b.devs[n], pod) })
	if best < 0 {
		return -1, nil, false, nil
	}
	if p.NumGPU == 0 {
		return best, nil, true, nil
	}
	// The predicates plugin's AllocateFunc: Allocate on the session's copy
	// of the node, which PATCHes the pod's annotations.
	client := builtinClient()
	if err := builtinSnapshot(b.devs[best]).Allocate(client, pod); err != nil {
		return -1, nil, false, fmt.Errorf("built-in vGPU: allocate pod %s on node %d: %w", pod.Name, best, err)
	}
	v, found := builtinPatches.LoadAndDelete(pod.Namespace + "/" + pod.Name)
	if !found {
		return -1, nil, false, fmt.Errorf("built-in vGPU: allocate pod %s on node %d: no annotations patched", pod.Name, best)
	}
	for k, val := range v.(map[string]string) {
		pod.Annotations[k] = val
	}
	// The cache, seeing the patched pod bound to the node, adds it to the
	// node's devices.
	b.devs[best].AddResource(pod)
	cards, err := cardsOf(pod.Annotations[bvgpu.AssignedIDsAnnotations], best)
	if err != nil {
		return -1, nil, false, fmt.Errorf("built-in vGPU: pod %s: %w", pod.Name, err)
	}
	return best, cards, true, nil
}

// filterScore is the deviceshare plugin's predicate (FilterNode) and node
// order (ScoreNode when a SchedulePolicy is set and the pod asks for a
// vGPU, rounded to an integer as getDeviceScore does).
func (b *builtinPolicy) filterScore(d *bvgpu.GPUDevices, pod *v1.Pod) (bool, float64) {
	code, _, err := d.FilterNode(pod, b.policy)
	if err != nil || code != devices.Success {
		return false, 0
	}
	if b.policy == "" || !d.HasDeviceRequest(pod) {
		return true, 0
	}
	return true, math.Floor(d.ScoreNode(pod, b.policy) + 0.5)
}
