package bind

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podWatch lets a bind wait for a pod bound earlier to be served through
// the scheduler's own pod informer (Volcano's SharedInformerFactory, which
// its cache already runs), instead of a GET and a watch of its own per
// bind: at 2,000 pods that was 2 API requests and one watch per pod, and
// a watch costs the API server a watcher to dispatch to (make bench-e2e's
// request and CPU breakdowns).
//
// The informer may lag the API server but never runs ahead of it, so a pod
// it shows served is served; one it shows pending is waited for until an
// event of that pod arrives. A pod it does not have is asked of the API
// server (waitServed's GET path): gone, or not seen yet.
type podWatch struct {
	lister listersv1.PodLister

	mu      sync.Mutex
	waiters map[types.NamespacedName][]chan struct{}
}

// newPodWatch registers on factory's pod informer; nil when there is no
// factory (sessions built by tests).
func newPodWatch(factory informers.SharedInformerFactory) *podWatch {
	if factory == nil {
		return nil
	}
	pods := factory.Core().V1().Pods()
	w := &podWatch{lister: pods.Lister(), waiters: map[types.NamespacedName][]chan struct{}{}}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.changed,
		UpdateFunc: func(_, obj any) { w.changed(obj) },
		DeleteFunc: w.changed,
	}); err != nil {
		klog.ErrorS(err, "Cannot follow pods through the scheduler's informer; binds that wait for a node agent read the API server")
		return nil
	}
	return w
}

// changed wakes the waiters of the pod obj is (or was).
func (w *podWatch) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	w.mu.Lock()
	chans := w.waiters[key]
	delete(w.waiters, key)
	w.mu.Unlock()
	for _, c := range chans {
		close(c)
	}
}

// next returns a channel closed at the pod's next event. Call it before
// reading the pod, so an event between the read and the wait is not lost;
// stop forgets the channel when the wait ends otherwise.
func (w *podWatch) next(key types.NamespacedName) (c <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiters[key] = append(w.waiters[key], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.waiters[key]
		for i, x := range list {
			if x == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(w.waiters, key)
		} else {
			w.waiters[key] = list
		}
	}
}

// get returns the informer's copy of the pod (not to be modified).
func (w *podWatch) get(key types.NamespacedName) (*v1.Pod, bool) {
	p, err := w.lister.Pods(key.Namespace).Get(key.Name)
	return p, err == nil
}
