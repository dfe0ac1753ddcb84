package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/registrar"
)

// Defaults of Options.
const (
	// DefaultStaleAfter is how old (by bind-time) an allocation may be when
	// the kubelet asks for it: the node lock's lifetime.
	DefaultStaleAfter = 5 * time.Minute
	// DefaultInformerWait is how long Allocate waits by default for a
	// just-bound pod to reach the agent's informer.
	DefaultInformerWait = 3 * time.Second
	// MaxInformerWait bounds --informer-wait, well inside the kubelet's
	// deadline for Allocate.
	MaxInformerWait = 30 * time.Second
)

// Options are the settings every node agent has, one flag each. An agent
// embeds them in its own options.
type Options struct {
	NodeName           string
	Kubeconfig         string
	KubeletSocketDir   string
	SocketName         string
	ResourceName       string
	ConfigFile         string
	ConfigMapNamespace string
	ConfigMapName      string
	HandshakeInterval  time.Duration
	// StaleAfter refuses allocations whose bind-time is older.
	StaleAfter time.Duration
	// InformerWait bounds how long Allocate waits for a just-bound pod to
	// reach the agent's informer.
	InformerWait time.Duration

	profile Profile
}

// Profile is what sets one agent's common flags apart from another's.
type Profile struct {
	// SocketName is the default of --socket-name.
	SocketName string
	// SocketNameOptional allows an empty --socket-name (the agent derives
	// one).
	SocketNameOptional bool
	// ResourceExample is an extended resource name for the error about a
	// bad --resource-name.
	ResourceExample string
	// Usage holds the help of the flags whose meaning differs.
	Usage Usage
}

// Usage holds the help of the flags whose meaning differs between agents.
type Usage struct {
	SocketName, ResourceName, ConfigFile, HandshakeInterval string
}

// NewOptions returns the defaults, reading NODE_NAME from the environment.
func NewOptions(p Profile) Options {
	return Options{
		NodeName:           os.Getenv("NODE_NAME"),
		KubeletSocketDir:   pluginapi.DevicePluginPath,
		SocketName:         p.SocketName,
		ConfigMapNamespace: config.DefaultConfigMapNamespace,
		ConfigMapName:      config.DefaultConfigMapName,
		HandshakeInterval:  registrar.DefaultHandshakeInterval,
		StaleAfter:         DefaultStaleAfter,
		InformerWait:       DefaultInformerWait,
		profile:            p,
	}
}

// AddFlags registers the flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	u := o.profile.Usage
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "this node's name (default $NODE_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	fs.StringVar(&o.KubeletSocketDir, "kubelet-socket-dir", o.KubeletSocketDir, "the kubelet's device-plugin directory (holds kubelet.sock)")
	fs.StringVar(&o.SocketName, "socket-name", o.SocketName, u.SocketName)
	fs.StringVar(&o.ResourceName, "resource-name", o.ResourceName, u.ResourceName)
	fs.StringVar(&o.ConfigFile, "config-file", o.ConfigFile, u.ConfigFile)
	fs.StringVar(&o.ConfigMapNamespace, "configmap-namespace", o.ConfigMapNamespace, "namespace of the device ConfigMap")
	fs.StringVar(&o.ConfigMapName, "configmap-name", o.ConfigMapName, "name of the device ConfigMap")
	fs.DurationVar(&o.HandshakeInterval, "handshake-interval", o.HandshakeInterval, u.HandshakeInterval)
	fs.DurationVar(&o.StaleAfter, "allocation-timeout", o.StaleAfter, "refuse allocations whose bind-time is older than this")
	fs.DurationVar(&o.InformerWait, "informer-wait", o.InformerWait,
		"how long Allocate waits for a just-bound pod to reach the agent's informer before refusing (0..30s)")
}

// Problems collects invalid options, each naming the flag, the value and
// what is allowed.
type Problems struct{ errs []error }

// Add records a bad value of --flag.
func (p *Problems) Add(flag string, value any, allowed string) {
	p.errs = append(p.errs, fmt.Errorf("--%s=%v: %s", flag, value, allowed))
}

// Quoted records a bad string value of --flag, quoted.
func (p *Problems) Quoted(flag, value, allowed string) {
	p.Add(flag, fmt.Sprintf("%q", value), allowed)
}

// AddErr records a problem that says itself what is wrong.
func (p *Problems) AddErr(err error) { p.errs = append(p.errs, err) }

// Err joins the problems; nil when there are none.
func (p *Problems) Err() error { return errors.Join(p.errs...) }

// Check records the problems of the common options.
func (o *Options) Check(p *Problems) {
	if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		p.Quoted("node-name", o.NodeName, "want a node name (set the flag or NODE_NAME): "+strings.Join(msgs, "; "))
	}
	if !filepath.IsAbs(o.KubeletSocketDir) {
		p.Quoted("kubelet-socket-dir", o.KubeletSocketDir, "want an absolute path")
	}
	if (o.SocketName == "" && !o.profile.SocketNameOptional) || strings.ContainsRune(o.SocketName, '/') ||
		o.SocketName == deviceplugin.DefaultKubeletSocket {
		p.Quoted("socket-name", o.SocketName, "want a file name other than kubelet.sock")
	}
	if o.ResourceName != "" {
		if msgs := validation.IsQualifiedName(o.ResourceName); len(msgs) > 0 || !strings.Contains(o.ResourceName, "/") {
			p.Quoted("resource-name", o.ResourceName, "want an extended resource name like "+o.profile.ResourceExample)
		}
	}
	if o.ConfigFile == "" {
		if msgs := validation.IsDNS1123Label(o.ConfigMapNamespace); len(msgs) > 0 {
			p.Quoted("configmap-namespace", o.ConfigMapNamespace, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Subdomain(o.ConfigMapName); len(msgs) > 0 {
			p.Quoted("configmap-name", o.ConfigMapName, strings.Join(msgs, "; "))
		}
	}
	if o.HandshakeInterval <= 0 || o.HandshakeInterval >= registrar.MaxHandshakeInterval {
		p.Add("handshake-interval", o.HandshakeInterval, "want more than 0 and less than 60s (the scheduler's deadline)")
	}
	if o.InformerWait < 0 || o.InformerWait > MaxInformerWait {
		p.Add("informer-wait", o.InformerWait, "want a duration between 0 and 30s")
	}
	if o.StaleAfter <= 0 {
		p.Add("allocation-timeout", o.StaleAfter, "want a positive duration")
	}
}

// ReadConfigFile reads the device configuration from --config-file.
func (o *Options) ReadConfigFile() (*config.Config, error) {
	data, err := os.ReadFile(o.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", o.ConfigFile, err)
	}
	return cfg, nil
}
