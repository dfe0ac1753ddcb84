package kubectlvshare

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
)

// Clients are what the plugin reads the cluster with.
type Clients struct {
	Kube    kubernetes.Interface
	Volcano vcclient.Interface
}

// reader reads the objects the commands need, naming the object in every
// error.
type reader struct {
	c Clients
}

// nodes returns the node called name, or the nodes matching the label
// selector (all when empty), sorted by name.
func (r reader) nodes(ctx context.Context, name, selector string) ([]v1.Node, error) {
	if name != "" {
		n, err := r.c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, &apiError{verb: "get", resource: "nodes", name: name, err: err}
		}
		return []v1.Node{*n}, nil
	}
	list, err := r.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, &apiError{verb: "list", resource: "nodes", err: err}
	}
	slices.SortFunc(list.Items, func(a, b v1.Node) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// pods returns the pods of namespace ("" for all namespaces).
func (r reader) pods(ctx context.Context, namespace string) ([]v1.Pod, error) {
	list, err := r.c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &apiError{verb: "list", resource: "pods", namespace: namespace, err: err}
	}
	return list.Items, nil
}

// pod returns one pod.
func (r reader) pod(ctx context.Context, namespace, name string) (*v1.Pod, error) {
	p, err := r.c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, &apiError{verb: "get", resource: "pods", namespace: namespace, name: name, err: err}
	}
	return p, nil
}

// podGroup returns one PodGroup.
func (r reader) podGroup(ctx context.Context, namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	pg, err := r.c.Volcano.SchedulingV1beta1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, &apiError{verb: "get", resource: "podgroups", namespace: namespace, name: name, err: err}
	}
	return pg, nil
}

// events returns the events about the object kind/name in namespace,
// oldest first.
func (r reader) events(ctx context.Context, namespace, kind, name string) ([]v1.Event, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := r.c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, &apiError{verb: "list", resource: "events", namespace: namespace, err: err}
	}
	items := slices.DeleteFunc(list.Items, func(e v1.Event) bool {
		// The fake clientset ignores field selectors; the API server does not.
		return e.InvolvedObject.Kind != kind || e.InvolvedObject.Name != name
	})
	slices.SortStableFunc(items, func(a, b v1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return items, nil
}
