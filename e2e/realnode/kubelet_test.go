//go:build e2e

package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/images"
)

// probeResource is the probe plugin's resource, on both kubelets.
const probeResource = "vshare.e2e/probe"

// probeDevices are the probe plugin's devices.
var probeDevices = []string{"p0", "p1", "p2", "p3"}

// kubeletScenario is one pod both kubelets admit, with what the probe
// plugin answers.
type kubeletScenario struct {
	name string
	// init, sidecars and app are the device counts of the pod's regular
	// init containers, native sidecars (restartable init containers, which
	// come first here) and app containers; 0 asks for none.
	init, sidecars, app []int64
	// prefer answers GetPreferredAllocation; nil means the highest
	// available IDs, must-include ones first.
	prefer func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error)
	// failAllocate fails Allocate.
	failAllocate func(ids []string) error
	// unordered says the preference leaves the kubelet a choice out of a
	// set: the calls are compared by shape only.
	unordered bool
}

// highest prefers the must-include IDs, then the highest available ones:
// not what a kubelet would pick on its own, so its use shows.
func highest(r *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	out := slices.Clone(r.MustIncludeDeviceIDs)
	avail := slices.Clone(r.AvailableDeviceIDs)
	slices.Sort(avail)
	for i := len(avail) - 1; i >= 0 && len(out) < int(r.AllocationSize); i-- {
		if !slices.Contains(out, avail[i]) {
			out = append(out, avail[i])
		}
	}
	return out, nil
}

var kubeletScenarios = []kubeletScenario{
	{name: "one container, one device", app: []int64{1}},
	{name: "two containers", app: []int64{1, 2}},
	{name: "a container asking for none beside one asking", app: []int64{0, 1}},
	{name: "init container then app", init: []int64{1}, app: []int64{1}},
	// The app container takes one of the init container's two devices out
	// of a set, without asking the plugin (they cover its request).
	{name: "init container larger than app", init: []int64{2}, app: []int64{1}, unordered: true},
	{name: "sidecar beside app", sidecars: []int64{1}, app: []int64{1}},
	{name: "sidecar, init container and app", sidecars: []int64{1}, init: []int64{1}, app: []int64{2}},
	{name: "more devices than the node has", app: []int64{5}},
	{name: "a preference outside the available devices", app: []int64{1}, unordered: true,
		prefer: func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error) { return []string{"nope"}, nil }},
	{name: "GetPreferredAllocation fails", app: []int64{1},
		prefer: func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
			return nil, errors.New("probe: no preference today")
		}},
	{name: "Allocate fails", app: []int64{1}, failAllocate: func([]string) error { return errors.New("probe: refused") }},
}

// kubeletSide is one kubelet with the probe plugin registered.
type kubeletSide struct {
	name  string
	node  string
	probe *framework.ProbePlugin
	fake  *framework.FakeKubelet // nil for the real kubelet
}

// TestFakeKubeletDoesWhatTheRealOneDoes holds the fake kubelet, which
// drives the large-scale tests, beside the real kubelet v1.30.2: the same
// pods, on a node each, with the same probe device plugin registered with
// both; the calls each kubelet makes to the plugin (their arguments and
// order) and how each pod ends must be the same. Twice: with a plugin that
// offers no GetPreferredAllocation (as upstream's volcano-vgpu-device-plugin),
// where the kubelet takes devices out of a set in no defined order (Go map
// iteration: the real one's picks differ from run to run), so the calls are
// compared by how many devices each takes and how many of them an earlier
// container of the pod had; and with one that offers it, where the
// preference decides and the calls are compared exactly.
func TestFakeKubeletDoesWhatTheRealOneDoes(t *testing.T) {
	const ns = "kubelets"
	ctx := setup(t, ns, 10*time.Minute)
	for _, preferred := range []bool{false, true} {
		name := "without GetPreferredAllocation"
		if preferred {
			name = "with GetPreferredAllocation"
		}
		t.Run(name, func(t *testing.T) {
			var prefer func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error)
			if preferred {
				prefer = highest
			}
			real := &kubeletSide{name: "real", node: rc.Node.Name, probe: &framework.ProbePlugin{Resource: probeResource, Devices: probeDevices, Prefer: prefer}}
			if err := real.probe.Start(ctx, framework.KubeletDevicePluginDir, "vshare-e2e-probe-"+fmt.Sprint(preferred)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(real.probe.Stop)
			fake := startFakeSide(ctx, t, prefer)
			sides := []*kubeletSide{real, fake}
			for _, s := range sides {
				waitAllocatable(ctx, t, s.node, len(probeDevices))
			}
			if r, f := methods(real.probe.Calls()), methods(fake.probe.Calls()); !slices.Equal(r, f) {
				t.Errorf("at registration the real kubelet called %v, the fake one %v", r, f)
			}
			for i, sc := range kubeletScenarios {
				t.Run(sc.name, func(t *testing.T) {
					compareKubelets(ctx, t, ns, fmt.Sprintf("%t-%d", preferred, i), sides, sc, preferred)
				})
			}
		})
	}
}

// compareKubelets admits the scenario's pod on both sides and compares.
func compareKubelets(ctx context.Context, t *testing.T, ns, id string, sides []*kubeletSide, sc kubeletScenario, preferred bool) {
	got := make([][]framework.ProbeCall, len(sides))
	ends := make([]string, len(sides))
	errs := make([]error, len(sides))
	var wg sync.WaitGroup
	for i, s := range sides {
		s.probe.FailAllocate = sc.failAllocate
		if preferred {
			s.probe.Prefer = sc.prefer
			if s.probe.Prefer == nil {
				s.probe.Prefer = highest
			}
		}
		// The two kubelets share nothing: they admit their pods at once.
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i], errs[i] = admit(ctx, s, scenarioPod(ns, "s"+id+"-"+s.name, s.node, sc))
			got[i] = s.probe.Calls()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	const real, fake = 0, 1 // sides' order
	exact := preferred && !sc.unordered
	if exact {
		if diff := cmp.Diff(got[real], got[fake]); diff != "" {
			t.Errorf("plugin calls differ (-real +fake):\n%s", diff)
		}
	} else if diff := cmp.Diff(shape(got[real]), shape(got[fake])); diff != "" {
		t.Errorf("plugin calls differ in shape (-real +fake):\n%s", diff)
	}
	if ends[real] != ends[fake] {
		t.Errorf("the pod ended %q on the real kubelet, %q on the fake one", ends[real], ends[fake])
	}
	b, _ := json.Marshal(got[real])
	t.Logf("real kubelet: %s; pod %s", b, ends[real])
}

// shape is what of the calls does not depend on which devices a kubelet
// picked from a set: each call's method and sizes, and for each Allocate
// how many of its devices are new to the pod and how many an earlier
// container had.
func shape(calls []framework.ProbeCall) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range calls {
		switch c.Method {
		case "Allocate":
			for _, ids := range c.IDs {
				fresh, again := 0, 0
				for _, id := range ids {
					if seen[id] {
						again++
					} else {
						fresh++
					}
					seen[id] = true
				}
				out = append(out, fmt.Sprintf("Allocate new=%d reused=%d", fresh, again))
			}
		case "GetPreferredAllocation":
			out = append(out, fmt.Sprintf("GetPreferredAllocation available=%d must-include=%d size=%d", len(c.Available), len(c.MustInclude), c.Size))
		default:
			out = append(out, c.Method)
		}
	}
	return out
}

// startFakeSide runs the fake kubelet for a node of its own (a Node object
// no kubelet runs), with the probe plugin registered to it.
func startFakeSide(ctx context.Context, t *testing.T, prefer func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error)) *kubeletSide {
	t.Helper()
	const node = "fake-kubelet-node"
	_, err := rc.Kube.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "vshare.e2e/fake", Effect: v1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	dir := filepath.Join(rc.WorkDir, "fake-kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := framework.StartFakeKubelet(ctx, node, dir, rc.Kube)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	// The real kubelet fails a pod whose admission fails and never retries.
	k.SetFailPodsOnAdmissionError(true)
	s := &kubeletSide{name: "fake", node: node, fake: k, probe: &framework.ProbePlugin{Resource: probeResource, Devices: probeDevices, Prefer: prefer}}
	if err := s.probe.Start(ctx, dir, "vshare-e2e-probe"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.probe.Stop)
	return s
}

// waitAllocatable waits until the node advertises n probe devices.
func waitAllocatable(ctx context.Context, t *testing.T, node string, n int) {
	t.Helper()
	err := rc.Poll(ctx, time.Minute, node+" advertising the probe devices", func(ctx context.Context) (bool, error) {
		got, err := rc.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := got.Status.Allocatable[probeResource]
		return q.Value() == int64(n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func methods(calls []framework.ProbeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Method
	}
	return out
}

// scenarioPod is the scenario's pod bound to node (no scheduler): pause
// containers; init containers run pause's -v, which exits at once.
func scenarioPod(ns, name, node string, sc kubeletScenario) *v1.Pod {
	image := rc.Images[images.Pause].Reference
	container := func(name string, n int64, args ...string) v1.Container {
		c := v1.Container{Name: name, Image: image, Args: args, Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("8Mi")}}}
		if n > 0 {
			c.Resources.Limits = v1.ResourceList{probeResource: *resource.NewQuantity(n, resource.DecimalSI)}
		}
		return c
	}
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{NodeName: node, RestartPolicy: v1.RestartPolicyNever,
			Tolerations: []v1.Toleration{{Key: "vshare.e2e/fake", Operator: v1.TolerationOpExists}}},
	}
	for i, n := range sc.sidecars {
		c := container(fmt.Sprintf("sidecar%d", i), n)
		c.RestartPolicy = &always
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for i, n := range sc.init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, container(fmt.Sprintf("init%d", i), n, "-v"))
	}
	for i, n := range sc.app {
		pod.Spec.Containers = append(pod.Spec.Containers, container(fmt.Sprintf("app%d", i), n))
	}
	return pod
}

// admit creates the pod on the side's node, waits until its kubelet has
// admitted it or failed it, deletes it and waits until it is gone (its
// devices free again), and returns how its admission ended.
func admit(ctx context.Context, s *kubeletSide, pod *v1.Pod) (string, error) {
	pods := rc.Kube.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	var end string
	err = rc.Poll(ctx, time.Minute, s.name+" kubelet admitting "+pod.Name, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == v1.PodFailed {
			end = "Failed: " + p.Status.Reason
			return true, nil
		}
		if s.fake == nil {
			// The real kubelet admits a pod (every Allocate) before it
			// creates its sandbox: a started sandbox says admitted.
			if p.Status.Phase == v1.PodRunning || len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses) > 0 && p.Status.PodIP != "" {
				end = "admitted"
				return true, nil
			}
			return false, nil
		}
		a, ok := s.fake.Allocation(created.UID)
		if !ok {
			return false, nil
		}
		for _, c := range a.Containers {
			if c.Envs == nil {
				return false, nil
			}
		}
		end = "admitted"
		return true, nil
	})
	if err != nil {
		return "", err
	}
	grace := int64(0)
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	err = rc.Poll(ctx, time.Minute, pod.Name+" gone", func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	return end, err
}
