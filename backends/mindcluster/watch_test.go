package mindcluster

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// TestMindClusterDeviceInfoWatch checks the informer source: nothing before
// it starts, device-info ConfigMaps whole once it has listed, other
// ConfigMaps of kube-system reduced to their names, and updates followed.
func TestMindClusterDeviceInfoWatch(t *testing.T) {
	list := map[string]string{mindclusterproto.AnnotationFreeChips: mindclusterproto.EncodeChips(0)}
	client := fake.NewSimpleClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: mindclusterproto.DeviceInfoPrefix + "n1"},
			Data: mindclusterproto.DeviceInfoData(list, 1)},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "big"}, Data: map[string]string{"k": "v"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: mindclusterproto.DeviceInfoPrefix + "n2"},
			Data: mindclusterproto.DeviceInfoData(list, 1)},
	)
	w := &DeviceInfoWatch{}
	if _, ok := w.DeviceInfo("n1"); ok {
		t.Fatal("DeviceInfo served before the watch started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Start(ctx, client)
	w.Start(ctx, client) // a second start is a no-op
	cm, ok := w.DeviceInfo("n1")
	if !ok || cm.Data[mindclusterproto.DeviceInfoKey] == "" {
		t.Fatalf("DeviceInfo(n1) = %v, %v; want the ConfigMap with its data", cm, ok)
	}
	if _, ok := w.DeviceInfo("n2"); ok {
		t.Error("a ConfigMap outside kube-system was served")
	}
	if obj, ok, _ := w.store.GetByKey("kube-system/big"); !ok || len(obj.(*v1.ConfigMap).Data) != 0 {
		t.Errorf("a foreign ConfigMap is stored as %v (found %v), want its name only", obj, ok)
	}
	updated := cm.DeepCopy()
	updated.Data = mindclusterproto.DeviceInfoData(map[string]string{mindclusterproto.AnnotationFreeChips: mindclusterproto.EncodeChips(0, 1)}, 2)
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cm, _ := w.DeviceInfo("n1"); cm.Data[mindclusterproto.DeviceInfoKey] == updated.Data[mindclusterproto.DeviceInfoKey] {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("the ConfigMap update never reached the source")
}
