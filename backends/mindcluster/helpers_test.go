package mindcluster

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// testUnixNano is the fake clock's time in every test.
const testUnixNano = 1700000000000000123

// fakeSource serves device-info ConfigMaps by node name.
type fakeSource map[string]*v1.ConfigMap

func (s fakeSource) DeviceInfo(node string) (*v1.ConfigMap, bool) {
	cm, ok := s[node]
	return cm, ok
}

func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = clocktesting.NewFakePassiveClock(time.Unix(0, testUnixNano))
	}
	return New(opts)
}

// chips renders chip IDs as a MindCluster chip list.
func chips(ids ...int) string { return mindclusterproto.EncodeChips(ids...) }

// node310P builds a 310P node of total 8-core chips offering the free
// list; extra arguments are annotation key/value pairs.
func node310P(name string, total int, free string, annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{mindclusterproto.LabelServerType: "Ascend310P-8", mindclusterproto.LabelChipName: "310P3"},
		Annotations: map[string]string{mindclusterproto.AnnotationFreeChips: free},
	}}
	n.Status.Capacity = v1.ResourceList{
		v1.ResourceCPU:                   resource.MustParse("64"),
		mindclusterproto.ResourceNPUCore: *resource.NewQuantity(int64(8*total), resource.DecimalSI),
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

// corePod asks for cores AI cores in container "main", labelled for 310P;
// extra arguments are label key/value pairs.
func corePod(name string, cores int64, labels ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels:      map[string]string{mindclusterproto.LabelRingController: mindclusterproto.RingController310P},
		Annotations: map[string]string{},
	}}
	q := *resource.NewQuantity(cores, resource.DecimalSI)
	p.Spec.Containers = []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{mindclusterproto.ResourceNPUCore: q}, Requests: v1.ResourceList{mindclusterproto.ResourceNPUCore: q},
	}}}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	return p
}

// placed returns the pod carrying an allocation annotation; confirmed adds
// the device plugin's huawei.com/AscendReal.
func placed(p *v1.Pod, value string, confirmed bool) *v1.Pod {
	p = p.DeepCopy()
	p.Annotations[mindclusterproto.AnnotationNPUCore] = value
	if confirmed {
		p.Annotations[mindclusterproto.AnnotationAscendReal] = "Ascend310P-1c-100-0_0"
	}
	return p
}

func newDevicesFor(t testing.TB, b *Backend, n *v1.Node, pods ...*v1.Pod) *Devices {
	t.Helper()
	return testkit.NewDevices(t, b, n, pods...).(*Devices)
}

func allocated(t testing.TB, d device.Devices, p *v1.Pod, policy string) string {
	t.Helper()
	return testkit.Allocate(t, d, p, policy).Annotations[mindclusterproto.AnnotationNPUCore]
}

func resourceOf(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
