package gpushare

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// testUnixNano is the fake clock's time in every test.
const testUnixNano = 1700000000000000123

func newBackend(t testing.TB, mode Mode) *Backend {
	t.Helper()
	b, err := New(Options{Mode: mode, Clock: clocktesting.NewFakePassiveClock(time.Unix(0, testUnixNano))})
	if err != nil {
		t.Fatalf("New(%s): %v", mode, err)
	}
	return b
}

// gpuNode builds a node with the given gpu-number and gpu-memory
// capacities; "" leaves a capacity out. Extra arguments are annotation
// key/value pairs.
func gpuNode(number, memory string, annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	n.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("64")}
	if number != "" {
		n.Status.Capacity[gpushareproto.ResourceGPUNumber] = resource.MustParse(number)
	}
	if memory != "" {
		n.Status.Capacity[gpushareproto.ResourceGPUMemory] = resource.MustParse(memory)
	}
	if len(annotations) > 0 {
		n.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			n.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return n
}

// container builds a container whose limits hold res=value; "" means none.
func container(name string, res v1.ResourceName, value string) v1.Container {
	c := v1.Container{Name: name}
	if value != "" {
		c.Resources.Limits = v1.ResourceList{res: resource.MustParse(value)}
	}
	return c
}

// podWith builds a pod with one container per value, each limiting res.
func podWith(name string, res v1.ResourceName, values ...int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	for i, v := range values {
		p.Spec.Containers = append(p.Spec.Containers, container("c"+strconv.Itoa(i), res, strconv.FormatInt(v, 10)))
	}
	p.Status.Phase = v1.PodRunning
	return p
}

func sharePod(name string, mem ...int64) *v1.Pod {
	return podWith(name, gpushareproto.ResourceGPUMemory, mem...)
}

func numberPod(name string, n ...int64) *v1.Pod {
	return podWith(name, gpushareproto.ResourceGPUNumber, n...)
}

// placed returns a copy of the pod carrying gpu-index.
func placed(p *v1.Pod, index string) *v1.Pod {
	out := p.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[gpushareproto.AnnotationGPUIndex] = index
	return out
}

// devicesOf decodes the node and accounts the pods.
func devicesOf(t testing.TB, b *Backend, node *v1.Node, pods ...*v1.Pod) *Devices {
	t.Helper()
	return testkit.NewDevices(t, b, node, pods...).(*Devices)
}

// fourCards is a node with 4 cards of 16384 MiB.
func fourCards(annotations ...string) *v1.Node { return gpuNode("4", "65536", annotations...) }
