package config

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// configMapWatch is one running informer over one ConfigMap.
type configMapWatch struct {
	namespace, name string
	cancel          context.CancelFunc
	done            chan struct{} // closed once no handler can run any more
}

func (w *configMapWatch) running() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// Start watches the ConfigMap namespace/name and feeds it to Apply and Delete
// until ctx ends or Stop is called. It returns at once; the configuration
// changes when the informer has listed the object. If the ConfigMap does not
// exist once the informer has synced, the defaults serve.
//
// Start may be called again at any time, for example when the plugin's
// arguments name another ConfigMap: the same namespace/name is a no-op while
// its watch runs; another one stops the running watch (waiting until its
// handlers have returned) and starts a new one. The configuration being
// served stays in place until the new watch has synced. With no client,
// Start only logs that defaults serve.
func (l *Loader) Start(ctx context.Context, namespace, name string) error {
	if err := validateConfigMapRef(namespace, name); err != nil {
		return fmt.Errorf("start device config watch: %w", err)
	}
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if w := l.active; w != nil {
		if w.namespace == namespace && w.name == name && w.running() {
			return nil
		}
		w.cancel()
		<-w.done
		l.active = nil
	}
	if l.client == nil {
		klog.InfoS("No Kubernetes client; serving the default device config", "configMap", klog.KRef(namespace, name))
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &configMapWatch{namespace: namespace, name: name, cancel: cancel, done: make(chan struct{})}
	l.active = w
	go l.run(wctx, w)
	klog.V(2).InfoS("Watching device config", "configMap", klog.KRef(namespace, name), "key", ConfigKey)
	return nil
}

// Stop stops the running watch, if any, and waits until its handlers have
// returned. The configuration being served stays.
func (l *Loader) Stop() {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if l.active != nil {
		l.active.cancel()
		<-l.active.done
		l.active = nil
	}
}

// run drives one informer until ctx ends, then closes w.done.
func (l *Loader) run(ctx context.Context, w *configMapWatch) {
	defer close(w.done)
	informer := newConfigMapInformer(ctx, l.client, w.namespace, w.name)
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*v1.ConfigMap); ok {
				l.Apply(cm)
			}
		},
		UpdateFunc: func(_, obj any) {
			if cm, ok := obj.(*v1.ConfigMap); ok {
				l.Apply(cm)
			}
		},
		// The informer holds at most this one object, so any delete
		// (including a tombstone) is its deletion.
		DeleteFunc: func(any) { l.Delete() },
	})
	if err != nil {
		klog.ErrorS(err, "Cannot watch the device config; the current configuration keeps serving",
			"configMap", klog.KRef(w.namespace, w.name))
		return
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		informer.Run(ctx.Done()) // returns after its handlers have stopped
	}()
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		key := w.namespace + "/" + w.name
		if _, exists, _ := informer.GetStore().GetByKey(key); !exists {
			klog.InfoS("Device ConfigMap not found; serving the default device config",
				"configMap", klog.KRef(w.namespace, w.name))
			l.Delete()
		}
	}
	<-stopped
}

// newConfigMapInformer lists and watches the single ConfigMap namespace/name;
// ctx bounds its API calls.
func newConfigMapInformer(ctx context.Context, client kubernetes.Interface, namespace, name string) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return client.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return client.CoreV1().ConfigMaps(namespace).Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(lw, &v1.ConfigMap{}, 0, cache.Indexers{})
}

// validateConfigMapRef checks a namespace and ConfigMap name from the plugin
// arguments.
func validateConfigMapRef(namespace, name string) error {
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return fmt.Errorf("invalid ConfigMap namespace %q: %v", namespace, msgs)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("invalid ConfigMap name %q: %v", name, msgs)
	}
	return nil
}
