// Command vshare-webhook is the admission webhook of the sharing stack: it
// hides the node's devices from containers that ask for no share
// (overwriteEnv), gives pods asking for a share the scheduler and runtime
// class they need, and refuses what a share cannot survive (package
// admission). The chart runs it as a Deployment behind a Service and
// registers it with the API server; see docs/security.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/admission"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deploy/schedconf"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
)

type options struct {
	kubeconfig       string
	schedulerConf    string
	schedulerName    string
	agentHostPaths   string
	listen, health   string
	certFile         string
	keyFile          string
	secret           string
	namespace        string
	service          string
	mutating         string
	validating       string
	certValidity     time.Duration
	certSyncInterval time.Duration
}

func main() {
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster")
	flag.StringVar(&o.schedulerConf, "scheduler-conf", "/etc/vshare/scheduler/volcano-scheduler.conf",
		"the scheduler's configuration file (the chart mounts the scheduler's ConfigMap): the deviceshare plugin's arguments say which device types are on and name the device ConfigMap")
	flag.StringVar(&o.schedulerName, "scheduler-name", admission.DefaultSchedulerName,
		"schedulerName given to pods that ask for a share and name no scheduler; empty leaves them alone")
	flag.StringVar(&o.agentHostPaths, "agent-host-paths", "",
		"comma-separated host paths of the node agents (libvgpu's directory, the cache directory); hostPath volumes at, above or below them are refused")
	flag.StringVar(&o.listen, "listen", ":9443", "HTTPS address of the webhook")
	flag.StringVar(&o.health, "health-listen", ":8081", "HTTP address of /healthz and /readyz")
	flag.StringVar(&o.certFile, "tls-cert-file", "", "serving certificate (cert-manager); with --tls-key-file, instead of the self-managed certificate")
	flag.StringVar(&o.keyFile, "tls-key-file", "", "serving key (cert-manager)")
	flag.StringVar(&o.secret, "cert-secret", "vshare-webhook-tls", "Secret of the self-managed certificate, in --namespace")
	flag.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Service and the Secret")
	flag.StringVar(&o.service, "service", "vshare-webhook", "the webhook's Service, for the certificate's names")
	flag.StringVar(&o.mutating, "mutating-webhook-config", "vshare-webhook", "MutatingWebhookConfiguration whose caBundle the self-managed certificate keeps")
	flag.StringVar(&o.validating, "validating-webhook-config", "vshare-webhook", "ValidatingWebhookConfiguration whose caBundle the self-managed certificate keeps")
	flag.DurationVar(&o.certValidity, "cert-validity", 365*24*time.Hour, "validity of a self-managed certificate; it is renewed with a third left")
	flag.DurationVar(&o.certSyncInterval, "cert-sync-interval", time.Minute, "how often the certificate Secret and the caBundles are checked")
	flag.Parse()
	if err := run(o); err != nil {
		klog.ErrorS(err, "vshare-webhook")
		klog.Flush()
		os.Exit(1)
	}
}

func run(o options) error {
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	args, err := schedulerArgs(o.schedulerConf)
	if err != nil {
		return err
	}
	rc, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// The device configuration is read before serving: a webhook that
	// started on the defaults while the ConfigMap says overwriteEnv would
	// let pods through with every card. A ConfigMap that does not parse
	// stops it (the scheduler and the agents refuse it too).
	loader := config.NewLoader(config.LoaderOptions{Client: client})
	cm, err := client.CoreV1().ConfigMaps(args.ConfigMapNamespace).Get(ctx, args.ConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		klog.InfoS("Device ConfigMap not found; the defaults serve", "configMap", klog.KRef(args.ConfigMapNamespace, args.ConfigMapName))
	case err != nil:
		return fmt.Errorf("read the device ConfigMap %s/%s: %w", args.ConfigMapNamespace, args.ConfigMapName, err)
	default:
		loader.Apply(cm)
		if err := loader.LastError(); err != nil {
			return fmt.Errorf("device ConfigMap %s/%s: %w", args.ConfigMapNamespace, args.ConfigMapName, err)
		}
	}
	if err := loader.Start(ctx, args.ConfigMapNamespace, args.ConfigMapName); err != nil {
		return err
	}
	var paths []string
	for _, p := range strings.Split(o.agentHostPaths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	policy, err := admission.NewPolicy(admission.Options{Args: args, Config: loader.Snapshot, SchedulerName: o.schedulerName, AgentHostPaths: paths})
	if err != nil {
		return err
	}

	var certs admission.CertSource
	if o.certFile != "" {
		certs = &admission.Files{CertFile: o.certFile, KeyFile: o.keyFile}
		if _, err := certs.GetCertificate(nil); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
	} else {
		if o.namespace == "" {
			return errors.New("--namespace (or POD_NAMESPACE) is required for the self-managed certificate")
		}
		ss := &admission.SelfSigned{Client: client, Namespace: o.namespace, Secret: o.secret,
			DNSNames: []string{o.service + "." + o.namespace + ".svc", o.service + "." + o.namespace + ".svc.cluster.local"},
			Mutating: o.mutating, Validating: o.validating, Validity: o.certValidity}
		if _, err := ss.Sync(ctx); err != nil {
			return err
		}
		go ss.Run(ctx, o.certSyncInterval)
		certs = ss
	}

	srv := &http.Server{
		Addr: o.listen, Handler: &admission.Handler{Policy: policy},
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		ReadHeaderTimeout: 10 * time.Second,
	}
	health := &http.Server{Addr: o.health, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz":
			if _, err := certs.GetCertificate(nil); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		default:
			http.NotFound(w, r)
		}
	})}
	errc := make(chan error, 2)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	go func() { errc <- health.ListenAndServe() }()
	klog.InfoS("Serving", "address", o.listen, "deviceTypes", enabled(args), "configMap", klog.KRef(args.ConfigMapNamespace, args.ConfigMapName))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = health.Shutdown(sctx)
	return srv.Shutdown(sctx)
}

// schedulerArgs reads the deviceshare plugin's arguments from the
// scheduler's configuration file, with Volcano's and the plugin's own
// parsers (schedconf, as the deployment checks read it).
func schedulerArgs(file string) (pluginargs.Args, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return pluginargs.Args{}, fmt.Errorf("read the scheduler configuration: %w", err)
	}
	a, err := schedconf.SchedulerArgs(string(data))
	if err != nil {
		return pluginargs.Args{}, fmt.Errorf("%s: %w", file, err)
	}
	return a, nil
}

func enabled(a pluginargs.Args) []string {
	var out []string
	for name, on := range map[string]bool{"gpushare": a.GPUSharingEnable, "gpunumber": a.GPUNumberEnable, "vgpu": a.VGPUEnable,
		"ascend": a.AscendHAMiVNPUEnable, "mindcluster": a.AscendMindClusterVNPUEnable} {
		if on {
			out = append(out, name)
		}
	}
	return out
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}
