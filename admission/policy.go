package admission

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/backends/mindcluster"
	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Environment variables the webhook sets on containers that ask for no
// share. NVIDIA_VISIBLE_DEVICES=none makes the NVIDIA container runtime
// give a container no card ("none: no GPU will be accessible, but driver
// capabilities will be enabled", the toolkit's "Specialized
// Configurations" page); the Ascend Docker runtime reads
// ASCEND_VISIBLE_DEVICES the same way (HAMi's webhook sets both).
const (
	EnvNVIDIAVisible = "NVIDIA_VISIBLE_DEVICES"
	EnvAscendVisible = "ASCEND_VISIBLE_DEVICES"
	hidden           = "none"
)

// DefaultSchedulerName is the scheduler pods asking for a share are given
// when they name none (the chart's scheduler.schedulerNames[0]).
const DefaultSchedulerName = "volcano"

// Options configure a Policy.
type Options struct {
	// Args are the scheduler plugin's arguments (volcano-scheduler.conf's
	// deviceshare arguments): which device types are on. The webhook
	// builds the scheduler's own backends from them, so a request is
	// parsed and refused with the scheduler's code and messages.
	Args pluginargs.Args
	// Config returns the device configuration being served (the
	// ConfigMap's, through a config.Loader) and its generation.
	Config func() (*config.Config, uint64)
	// SchedulerName is set on pods asking for a share that name no
	// scheduler ("" or "default-scheduler"); empty turns that off.
	SchedulerName string
	// AgentHostPaths are the node agent's host directories and files
	// (libvgpu, the containers' regions and ld.so.preload): no pod may
	// mount them, or a directory above or below them, with a hostPath
	// volume.
	AgentHostPaths []string
}

// Policy decides what the webhook changes and refuses. It is safe for
// concurrent use.
type Policy struct {
	opts Options

	mu       sync.Mutex
	gen      uint64
	built    bool
	backends []device.Backend
	cfg      *config.Config
}

// NewPolicy checks the options and builds the backends of the current
// configuration.
func NewPolicy(opts Options) (*Policy, error) {
	if opts.Config == nil {
		return nil, errors.New("admission: Options.Config is required")
	}
	for _, p := range opts.AgentHostPaths {
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("admission: agent host path %q: want an absolute path", p)
		}
	}
	p := &Policy{opts: opts}
	if _, _, err := p.current(); err != nil {
		return nil, err
	}
	return p, nil
}

// current returns the backends and configuration of the configuration now
// served, rebuilding them when its generation changed.
func (p *Policy) current() ([]device.Backend, *config.Config, error) {
	cfg, gen := p.opts.Config()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.built && gen == p.gen {
		return p.backends, p.cfg, nil
	}
	bs, err := registry.Build(p.opts.Args, cfg, clock.RealClock{})
	if err != nil {
		return nil, nil, fmt.Errorf("device backends for configuration generation %d: %w", gen, err)
	}
	p.backends, p.cfg, p.gen, p.built = bs, cfg, gen, true
	return bs, cfg, nil
}

// kind is the family of a backend's devices, for the environment and
// runtime class settings of the configuration.
type kind int

const (
	kindNone kind = iota
	kindNVIDIA
	kindAscend
)

func kindOf(b device.Backend) kind {
	switch b.(type) {
	case *vgpu.Backend, *gpushare.Backend:
		return kindNVIDIA
	case *ascend.Backend, *mindcluster.Backend:
		return kindAscend
	}
	return kindNone
}

// share reports which device families one container asks for, judged by
// the backends' own HasDeviceRequest on a pod holding that container alone.
func share(bs []device.Backend, pod *v1.Pod, c *v1.Container) (nvidia, ascend bool) {
	return podShare(bs, &v1.Pod{ObjectMeta: pod.ObjectMeta, Spec: v1.PodSpec{Containers: []v1.Container{*c}}})
}

// podShare reports which families the pod asks for.
func podShare(bs []device.Backend, pod *v1.Pod) (nvidia, ascend bool) {
	for _, b := range bs {
		if !b.HasDeviceRequest(pod) {
			continue
		}
		switch kindOf(b) {
		case kindNVIDIA:
			nvidia = true
		case kindAscend:
			ascend = true
		}
	}
	return nvidia, ascend
}

// asksOther reports whether a container asks for a resource of another
// device plugin of the family (nvidia.com/gpu, huawei.com/Ascend910...):
// that plugin sets the container's visible devices itself, and hiding them
// would take its cards away.
func asksOther(c *v1.Container, prefix string) bool {
	for _, rl := range []v1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for name := range rl {
			if strings.HasPrefix(string(name), prefix) {
				return true
			}
		}
	}
	return false
}

// Change is one mutation, described for the response's patch and for
// operators (the webhook logs them).
type Change struct {
	// Op and Path are the JSON patch operation and path; Value its value.
	Op, Path string
	Value    any
	// Why says what the change is for.
	Why string
}

// Mutate returns the changes the webhook makes to a pod being created.
func (p *Policy) Mutate(pod *v1.Pod) ([]Change, error) {
	bs, cfg, err := p.current()
	if err != nil {
		return nil, err
	}
	var out []Change
	nvidia, ascend := podShare(bs, pod)
	if (nvidia || ascend) && p.opts.SchedulerName != "" &&
		(pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == v1.DefaultSchedulerName) {
		out = append(out, Change{Op: "add", Path: "/spec/schedulerName", Value: p.opts.SchedulerName,
			Why: "the pod asks for a device share and names no scheduler; only " + p.opts.SchedulerName + " can place a share"})
	}
	if pod.Spec.RuntimeClassName == nil {
		var rc string
		switch {
		case nvidia && cfg != nil && cfg.NVIDIA.RuntimeClassName != "":
			rc = cfg.NVIDIA.RuntimeClassName
		case ascend && cfg != nil:
			rc = ascendRuntimeClass(cfg, pod)
		}
		if rc != "" {
			out = append(out, Change{Op: "add", Path: "/spec/runtimeClassName", Value: rc,
				Why: "runtimeClassName of the device configuration for pods asking for a share"})
		}
	}
	hideNVIDIA := cfg != nil && cfg.NVIDIA.OverwriteEnv
	hideAscend := cfg != nil && cfg.VNPUs.OverwriteEnv
	if cfg != nil {
		for _, e := range cfg.VNPUs.Configs {
			// The per-entry form of older HAMi documents: the variable
			// hides every chip type alike.
			hideAscend = hideAscend || e.OverwriteEnv
		}
	}
	if !hideNVIDIA && !hideAscend {
		return out, nil
	}
	eachContainer(pod, func(list string, i int, c *v1.Container) {
		nv, as := share(bs, pod, c)
		env := c.Env
		changed := false
		if hideNVIDIA && !nv && !asksOther(c, "nvidia.com/") {
			env, changed = setEnv(env, EnvNVIDIAVisible, hidden)
		}
		if hideAscend && !as && !asksOther(c, "huawei.com/") {
			var ch bool
			env, ch = setEnv(env, EnvAscendVisible, hidden)
			changed = changed || ch
		}
		if changed {
			out = append(out, Change{Op: "add", Path: fmt.Sprintf("/spec/%s/%d/env", list, i), Value: env,
				Why: fmt.Sprintf("container %q asks for no share: overwriteEnv hides the node's devices from it", c.Name)})
		}
	})
	return out, nil
}

// ascendRuntimeClass is vnpus.runtimeClassName, or else that of the first
// vnpus entry (the per-entry form of older HAMi documents) whose count
// resource the pod asks for.
func ascendRuntimeClass(cfg *config.Config, pod *v1.Pod) string {
	if cfg.VNPUs.RuntimeClassName != "" {
		return cfg.VNPUs.RuntimeClassName
	}
	for _, e := range cfg.VNPUs.Configs {
		if e.RuntimeClassName == "" || e.ResourceName == "" {
			continue
		}
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				if _, ok := c.Resources.Limits[v1.ResourceName(e.ResourceName)]; ok {
					return e.RuntimeClassName
				}
			}
		}
	}
	return ""
}

// setEnv sets name=value in a copy of env, replacing every entry of that
// name (a later duplicate would win in the runtime), and reports whether
// anything changed.
func setEnv(env []v1.EnvVar, name, value string) ([]v1.EnvVar, bool) {
	out := make([]v1.EnvVar, 0, len(env)+1)
	found, changed := false, false
	for _, e := range env {
		if e.Name != name {
			out = append(out, e)
			continue
		}
		if found {
			changed = true
			continue
		}
		found = true
		if e.Value != value || e.ValueFrom != nil {
			changed = true
		}
		out = append(out, v1.EnvVar{Name: name, Value: value})
	}
	if !found {
		out = append(out, v1.EnvVar{Name: name, Value: value})
		changed = true
	}
	return out, changed
}

// Refusal is why a pod (or a workload's pod template) is refused.
type Refusal struct {
	// Field is the path of the offending field, from the object's root.
	Field string
	// Reason says what is wrong and what to do.
	Reason string
}

func (r Refusal) Error() string { return r.Field + ": " + r.Reason }

// agentContainerPaths are the paths the agent mounts into a container with
// a vGPU share (vgpu-device-plugin/allocate): libvgpu, /etc/ld.so.preload,
// the region directory.
var agentContainerPaths = []string{vgpuproto.ContainerLibPath, vgpuproto.ContainerPreloadPath, vgpuproto.ContainerCacheDir}

// Validate returns why a pod spec is refused, or nil. field is where the
// spec sits in the object ("spec" for a pod, "spec.template.spec" for a
// Deployment). The request is parsed by the scheduler's own backends
// (ValidateRequest), so the message is the one the scheduler would give.
func (p *Policy) Validate(meta *v1.Pod, field string) []Refusal {
	bs, _, err := p.current()
	if err != nil {
		return []Refusal{{Field: field, Reason: "the webhook cannot read the device configuration: " + err.Error()}}
	}
	var out []Refusal
	pod := meta
	nvidia, ascend := podShare(bs, pod)
	for _, b := range bs {
		if !b.HasDeviceRequest(pod) {
			continue
		}
		if err := b.ValidateRequest(pod); err != nil {
			out = append(out, Refusal{Field: field, Reason: b.Name() + ": " + err.Error()})
		}
	}
	out = append(out, p.hostPaths(pod, field)...)
	if !nvidia && !ascend {
		return out
	}
	if pod.Spec.HostPID {
		out = append(out, Refusal{Field: field + ".hostPID", Reason: "a pod with a device share cannot share the host's PID namespace: " +
			"it would see and signal every container's processes, those holding other shares included (docs/security.md)"})
	}
	eachContainer(pod, func(list string, i int, c *v1.Container) {
		nv, as := share(bs, pod, c)
		if !nv && !as {
			return
		}
		cf := fmt.Sprintf("%s.%s[%d]", field, list, i)
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			out = append(out, Refusal{Field: cf + ".securityContext.privileged", Reason: fmt.Sprintf(
				"container %q asks for a device share and is privileged: a privileged container gets every device node of the host, every card whole; ask for whole cards without privileges, or drop the share", c.Name)})
		}
		if !nv {
			return
		}
		for j, e := range c.Env {
			if e.Name == vgpuproto.EnvDisableControl && (e.ValueFrom != nil || !strings.EqualFold(e.Value, "false") && e.Value != "") {
				out = append(out, Refusal{Field: fmt.Sprintf("%s.env[%d]", cf, j), Reason: fmt.Sprintf(
					"container %q asks for a vGPU share and sets %s: that turns the share's limits off (the container would use the whole card); remove it", c.Name, vgpuproto.EnvDisableControl)})
			}
		}
		for j, m := range c.VolumeMounts {
			for _, ap := range agentContainerPaths {
				if m.MountPath == ap || within(m.MountPath, ap) {
					out = append(out, Refusal{Field: fmt.Sprintf("%s.volumeMounts[%d].mountPath", cf, j), Reason: fmt.Sprintf(
						"container %q mounts %q over %s, which the node agent mounts to enforce the share; use another path", c.Name, m.MountPath, ap)})
				}
			}
		}
	})
	return out
}

// hostPaths refuses hostPath volumes at, above or below the agent's host
// paths: they hold libvgpu, the preload file and every container's region,
// which a pod could rewrite to lift its own or another pod's limits.
func (p *Policy) hostPaths(pod *v1.Pod, field string) []Refusal {
	var out []Refusal
	for i, vol := range pod.Spec.Volumes {
		if vol.HostPath == nil {
			continue
		}
		hp := path.Clean(vol.HostPath.Path)
		for _, ap := range p.opts.AgentHostPaths {
			ap = path.Clean(ap)
			if hp == ap || within(hp, ap) || within(ap, hp) {
				out = append(out, Refusal{Field: fmt.Sprintf("%s.volumes[%d].hostPath.path", field, i), Reason: fmt.Sprintf(
					"volume %q mounts the host's %q, which holds or lies under the node agent's %s (libvgpu and the shares' state); no pod may mount it", vol.Name, vol.HostPath.Path, ap)})
				break
			}
		}
	}
	return out
}

// eachContainer calls f with each init container and container of the pod,
// with the name of its list in the spec and its index there.
func eachContainer(pod *v1.Pod, f func(list string, i int, c *v1.Container)) {
	for i := range pod.Spec.InitContainers {
		f("initContainers", i, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		f("containers", i, &pod.Spec.Containers[i])
	}
}

// within reports whether p lies strictly under dir.
func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}
