package mindcluster

import (
	"context"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// DeviceInfoSyncTimeout bounds how long the first session waits for the
// device-info informer's initial list, so that nodes whose chip lists live
// only in their ConfigMaps are not reported invalid at startup.
const DeviceInfoSyncTimeout = 10 * time.Second

// DeviceInfoWatch serves MindCluster's per-node device-info ConfigMaps
// (kube-system/mindx-dl-deviceinfo-<node>) from one informer over
// kube-system's ConfigMaps, started with the first session's client. The
// informer keeps only the data of ConfigMaps with the device-info prefix;
// others are stored as bare names (the API offers no prefix selector).
// It implements DeviceInfoSource and is safe for concurrent use.
//
// Locking: mu guards started and store; the store is the informer's
// thread-safe cache.
type DeviceInfoWatch struct {
	mu      sync.Mutex
	started bool
	store   cache.Store
}

var _ DeviceInfoSource = (*DeviceInfoWatch)(nil)

// Start runs the informer until ctx ends, once; later calls are no-ops. It
// waits for the initial list for at most DeviceInfoSyncTimeout; the store
// serves only once that wait is over.
func (w *DeviceInfoWatch) Start(ctx context.Context, client kubernetes.Interface) {
	w.mu.Lock()
	if w.started || client == nil {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.mu.Unlock()
	cms := client.CoreV1().ConfigMaps(mindclusterproto.DeviceInfoNamespace)
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, opts) },
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return cms.Watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &v1.ConfigMap{}, 0, cache.Indexers{})
	if err := informer.SetTransform(stripForeignConfigMap); err != nil {
		klog.ErrorS(err, "Cannot trim the device-info informer's objects; keeping them whole")
	}
	go informer.Run(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, DeviceInfoSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		klog.InfoS("MindCluster device-info ConfigMaps not listed yet; nodes use their annotations until they are",
			"namespace", mindclusterproto.DeviceInfoNamespace)
	}
	w.mu.Lock()
	w.store = informer.GetStore()
	w.mu.Unlock()
	klog.V(2).InfoS("Watching MindCluster device-info ConfigMaps", "namespace", mindclusterproto.DeviceInfoNamespace,
		"prefix", mindclusterproto.DeviceInfoPrefix)
}

// DeviceInfo returns the node's device-info ConfigMap, if the informer has
// seen it. The object is the informer's: callers must not modify it.
func (w *DeviceInfoWatch) DeviceInfo(node string) (*v1.ConfigMap, bool) {
	w.mu.Lock()
	store := w.store
	w.mu.Unlock()
	if store == nil {
		return nil, false
	}
	obj, ok, err := store.GetByKey(mindclusterproto.DeviceInfoNamespace + "/" + mindclusterproto.DeviceInfoPrefix + node)
	if err != nil || !ok {
		return nil, false
	}
	cm, ok := obj.(*v1.ConfigMap)
	return cm, ok
}

// stripForeignConfigMap keeps device-info ConfigMaps whole and reduces
// every other ConfigMap to its namespace and name.
func stripForeignConfigMap(obj any) (any, error) {
	cm, ok := obj.(*v1.ConfigMap)
	if !ok || strings.HasPrefix(cm.Name, mindclusterproto.DeviceInfoPrefix) {
		return obj, nil
	}
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name,
		ResourceVersion: cm.ResourceVersion}}, nil
}
