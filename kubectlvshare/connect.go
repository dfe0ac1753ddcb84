package kubectlvshare

import (
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
)

// ConnectOptions are kubectl's connection flags.
type ConnectOptions struct {
	// Kubeconfig is the file; empty means $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	Context    string
	// Namespace overrides the context's namespace.
	Namespace string
	// Timeout bounds each request.
	Timeout time.Duration
}

// Connect builds the clients from the kubeconfig, as kubectl does, and
// returns the namespace commands default to.
func Connect(o ConnectOptions) (Clients, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	overrides.Context.Namespace = o.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return Clients{}, "", fmt.Errorf("no cluster: no kubeconfig found (set --kubeconfig or KUBECONFIG)")
		}
		return Clients{}, "", fmt.Errorf("no cluster: kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return Clients{}, "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	cfg.Timeout = o.Timeout
	cfg.UserAgent = "kubectl-vshare"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, "", fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	vc, err := vcclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, "", fmt.Errorf("volcano client for %s: %w", cfg.Host, err)
	}
	return Clients{Kube: kube, Volcano: vc}, ns, nil
}
