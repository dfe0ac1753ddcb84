package kube

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
)

// NewClient builds a client from the kubeconfig file, or from the in-cluster
// configuration when kubeconfig is empty; userAgent names the agent.
func NewClient(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (--kubeconfig=%q): %w", kubeconfig, err)
	}
	cfg.UserAgent = userAgent
	// Protobuf for the built-in types the agents read and write (pods,
	// nodes, events), JSON where a type has no protobuf form, as the
	// kubelet does (its --kube-api-content-type default): decoding the
	// node's pod watch as JSON took 14 % of the agents' CPU in a burst
	// (bench/results/e2e-agent-profile-json.txt), protobuf 6.6 %
	// (e2e-agent-profile.txt).
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// NewEventRecorder records events (an agent's refusals, on the pods it
// refused) as component on node.
func NewEventRecorder(client kubernetes.Interface, component, node string) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component, Host: node})
}
