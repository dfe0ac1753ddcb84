package deviceshare

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"k8s.io/client-go/kubernetes"
)

// The widget backend is a minimal device type whose memory resource no
// node advertises, like HAMi's Ascend memory: inventory from the node
// annotation "example.com/widgets" = "<cards>x<MiB>", requests in
// example.com/widget-memory, one card per pod, first fit.
const (
	widgetInventory = "example.com/widgets"
	widgetMemory    = v1.ResourceName("example.com/widget-memory")
	widgetIndex     = "example.com/widget-index"
)

type widgetBackend struct{}

type widgetDevices struct {
	total, used []int64
}

var (
	_ device.Backend    = widgetBackend{}
	_ device.Devices    = (*widgetDevices)(nil)
	_ device.Advertiser = (*widgetDevices)(nil)
)

func widgetRequest(pod *v1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[widgetMemory]; ok {
			n += q.Value()
		}
	}
	return n
}

func (widgetBackend) Name() string                      { return "widget" }
func (widgetBackend) HasDeviceRequest(pod *v1.Pod) bool { return widgetRequest(pod) > 0 }
func (widgetBackend) ValidateRequest(*v1.Pod) error     { return nil }
func (widgetBackend) InventoryKey(node *v1.Node) string { return node.Annotations[widgetInventory] }
func (widgetBackend) NewDevices(node *v1.Node) (device.Devices, error) {
	v, ok := node.Annotations[widgetInventory]
	if !ok {
		return nil, nil
	}
	var cards int
	var mem int64
	if _, err := fmt.Sscanf(v, "%dx%d", &cards, &mem); err != nil {
		return nil, fmt.Errorf("annotation %s=%q: %w", widgetInventory, v, err)
	}
	d := &widgetDevices{total: make([]int64, cards), used: make([]int64, cards)}
	for i := range d.total {
		d.total[i] = mem
	}
	return d, nil
}

func (d *widgetDevices) index(pod *v1.Pod) (int, bool, error) {
	v, ok := pod.Annotations[widgetIndex]
	if !ok {
		return 0, false, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= len(d.total) {
		return 0, false, fmt.Errorf("annotation %s=%q: not a card index", widgetIndex, v)
	}
	return i, true, nil
}

func (d *widgetDevices) AddResource(pod *v1.Pod) error {
	i, ok, err := d.index(pod)
	if ok {
		d.used[i] += widgetRequest(pod)
	}
	return err
}

func (d *widgetDevices) SubResource(pod *v1.Pod) error {
	i, ok, err := d.index(pod)
	if ok {
		d.used[i] -= widgetRequest(pod)
	}
	return err
}

func (d *widgetDevices) AddQueueResource(*v1.Pod) map[string]float64 { return nil }
func (d *widgetDevices) HasDeviceRequest(pod *v1.Pod) bool           { return widgetRequest(pod) > 0 }

func (d *widgetDevices) fit(pod *v1.Pod) int {
	for i := range d.total {
		if d.total[i]-d.used[i] >= widgetRequest(pod) {
			return i
		}
	}
	return -1
}

func (d *widgetDevices) FilterNode(pod *v1.Pod, _ string) *device.Status {
	if d.fit(pod) < 0 {
		return device.NewStatus(device.Unschedulable, "insufficient widget memory on card")
	}
	return nil
}

func (d *widgetDevices) ScoreNode(*v1.Pod, string) float64 { return 0 }

func (d *widgetDevices) Allocate(pod *v1.Pod, _ string) (*device.Reservation, error) {
	i := d.fit(pod)
	if i < 0 {
		return nil, fmt.Errorf("no widget card fits")
	}
	d.used[i] += widgetRequest(pod)
	return &device.Reservation{Annotations: map[string]string{widgetIndex: strconv.Itoa(i)}}, nil
}

func (d *widgetDevices) Release(pod *v1.Pod, r *device.Reservation) error {
	return d.SubResource(device.ApplyReservation(pod, r))
}

func (d *widgetDevices) GetIgnoredDevices() []string { return []string{string(widgetMemory)} }
func (d *widgetDevices) GetStatus() string           { return fmt.Sprint(d.used, "/", d.total) }
func (d *widgetDevices) DeepCopy() device.Devices {
	return &widgetDevices{total: append([]int64(nil), d.total...), used: append([]int64(nil), d.used...)}
}

func (d *widgetDevices) Advertised() v1.ResourceList {
	var sum int64
	for _, t := range d.total {
		sum += t
	}
	return v1.ResourceList{widgetMemory: *resource.NewQuantity(sum, resource.DecimalSI)}
}

// TestUnadvertisedResourceIsAdvertisedAndPodBinds proves that a resource no
// node advertises does not keep pods pending: Volcano's own fit and its
// cache's bind check reject such a pod until the plugin has advertised the
// device totals in the node's status; then the pod binds with its card.
func TestUnadvertisedResourceIsAdvertisedAndPodBinds(t *testing.T) {
	c := newCluster(t, schedulerConf(`      deviceshare.GPUSharingEnable: true`), nil, nil)
	c.st.factory = func(context.Context, kubernetes.Interface, pluginargs.Args, *config.Config, clock.PassiveClock) ([]device.Backend, error) {
		return []device.Backend{widgetBackend{}}, nil
	}
	t.Cleanup(c.st.Close)

	node := gpuNode("n1", 0, 0)
	node.Annotations[widgetInventory] = "2x8000"
	client := c.cache.Client()
	if _, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitForNode("n1", func(n *v1.Node) bool { return n != nil })

	pod := devicePod("w", "pg1", v1.ResourceList{widgetMemory: resource.MustParse("6000")})
	c.addJob(podGroup("pg1", 1), pod)
	c.session(nil)
	c.expectNoBind()

	c.waitForNode("n1", func(n *v1.Node) bool {
		q, ok := n.Status.Allocatable[widgetMemory]
		return ok && q.Value() == 16000
	})
	c.session(nil)
	binds := c.waitBinds(1)
	if got := binds[testNamespace+"/w"]; got.Node != "n1" || got.Annotations[widgetIndex] != "0" {
		t.Errorf("bind = %+v, want n1 with %s=0", got, widgetIndex)
	}
	if c.st.adv.PatchCount() != 1 {
		t.Errorf("node status patches = %d, want 1 (only on change)", c.st.adv.PatchCount())
	}
}

// waitForNode polls the cache's snapshot until cond holds for the node.
func (c *cluster) waitForNode(name string, cond func(*v1.Node) bool) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var node *v1.Node
		if ni := c.cache.Snapshot().Nodes[name]; ni != nil {
			node = ni.Node
		}
		if node != nil && cond(node) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("node %s never reached the expected state", name)
}
