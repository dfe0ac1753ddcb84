package testkit

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/device"
)

// Namespace is the namespace of every pod Pod builds.
const Namespace = "ns"

// Limits returns the quantities as a resource list; negative values are
// left out, so a builder can say "this container does not name it".
func Limits(q map[v1.ResourceName]int64) v1.ResourceList {
	l := v1.ResourceList{}
	for name, v := range q {
		if v >= 0 {
			l[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return l
}

// Pod returns a running pod in Namespace with UID "uid-<name>", one
// container "c<i>" per entry of limits (its limits), and the annotation
// key/value pairs (the map is never nil).
func Pod(name string, limits []v1.ResourceList, annotations ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("uid-" + name),
		Annotations: Pairs(annotations...)}}
	for i, l := range limits {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + strconv.Itoa(i),
			Resources: v1.ResourceRequirements{Limits: l}})
	}
	p.Status.Phase = v1.PodRunning
	return p
}

// Node returns a node with the annotation key/value pairs (the map is
// never nil).
func Node(name string, annotations ...string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: Pairs(annotations...)}}
}

// Pairs returns the key/value pairs as a map; a trailing key without a
// value is ignored.
func Pairs(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// NewDevices returns the backend's Devices for the node with the pods
// accounted, failing the test when the node has none or a pod is refused.
func NewDevices(t testing.TB, b device.Backend, node *v1.Node, pods ...*v1.Pod) device.Devices {
	t.Helper()
	d, err := b.NewDevices(node)
	if err != nil {
		t.Fatalf("NewDevices(%s): %v", node.Name, err)
	}
	if d == nil {
		t.Fatalf("NewDevices(%s) found no devices", node.Name)
	}
	for _, p := range pods {
		if err := d.AddResource(p); err != nil {
			t.Fatalf("AddResource(%s): %v", p.Name, err)
		}
	}
	return d
}

// Allocate allocates the pod, failing the test on an error.
func Allocate(t testing.TB, d device.Devices, pod *v1.Pod, policy string) *device.Reservation {
	t.Helper()
	r, err := d.Allocate(pod, policy)
	if err != nil {
		t.Fatalf("Allocate(%s): %v", pod.Name, err)
	}
	return r
}

// Usage returns the per-card usage the Devices report.
func Usage(d device.CardReporter) []device.CardUsage {
	u, _ := d.CardUsage()
	return u
}
