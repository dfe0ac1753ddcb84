package request

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// FullCores is a whole card's cores in percent: vgpu-cores=100 asks for an
// unused card.
const FullCores = 100

// PolicyTopologyAware is the card policy (hami.io/gpu-scheduler-policy)
// that chooses multi-card sets with the best links.
const PolicyTopologyAware = "topology-aware"

// AnnotationGroupName is the PodGroup a pod belongs to (set by Volcano);
// volcano.sh/vgpu-podgroup-policy spread keeps its members apart.
const AnnotationGroupName = "scheduling.k8s.io/group-name"

// Parser reads pods' vGPU requests under one nvidia: configuration. It is
// immutable after NewParser and safe for concurrent use.
type Parser struct {
	// ResCount, ResMemory, ResPercent, ResCores and ResPriority are the
	// configured resource names: cards, memory, memory percentage, cores
	// and task priority.
	ResCount, ResMemory, ResPercent, ResCores, ResPriority v1.ResourceName
	// Factor is nvidia.gpuMemoryFactor: MiB per unit of the memory
	// resource, at least 1.
	Factor        int64
	defaultMemMiB int64
	defaultCores  int32
	defaultGPUNum int32
	// rules are the exclusive rules (RuleMask).
	rules []device.ExclusiveRule
}

// NewParser returns the parser of the nvidia: section cfg, with the
// exclusive rules (deviceshare.GPUExclusiveRules, validated: none empty;
// at most 64, one bit each in Pod.Rules; the slice is not modified).
// Defaults no request could be served with are an error naming the
// setting.
func NewParser(cfg *config.NVIDIAConfig, rules []device.ExclusiveRule) (*Parser, error) {
	p := &Parser{
		ResCount:      resourceOr(cfg.ResourceCountName, config.DefaultResourceCountName),
		ResMemory:     resourceOr(cfg.ResourceMemoryName, config.DefaultResourceMemoryName),
		ResPercent:    resourceOr(cfg.ResourceMemoryPercentageName, config.DefaultResourceMemoryPercentageName),
		ResCores:      resourceOr(cfg.ResourceCoreName, config.DefaultResourceCoreName),
		ResPriority:   resourceOr(cfg.ResourcePriorityName, config.DefaultResourcePriorityName),
		Factor:        int64(cfg.GPUMemoryFactor),
		defaultMemMiB: int64(cfg.DefaultMemory),
		defaultCores:  cfg.DefaultCores,
		defaultGPUNum: cfg.DefaultGPUNum,
		rules:         rules,
	}
	if len(p.rules) > 64 {
		return nil, fmt.Errorf("vgpu options: %d exclusive rules: want at most 64", len(p.rules))
	}
	if p.Factor <= 0 {
		p.Factor = 1
	}
	switch {
	case p.defaultMemMiB < 0 || p.defaultMemMiB > vgpuproto.MaxMemoryMiB:
		return nil, fmt.Errorf("vgpu options: nvidia.defaultMemory=%d: want 0 to %d MiB", cfg.DefaultMemory, vgpuproto.MaxMemoryMiB)
	case p.defaultCores < 0 || p.defaultCores > FullCores:
		return nil, fmt.Errorf("vgpu options: nvidia.defaultCores=%d: want 0 to %d", cfg.DefaultCores, FullCores)
	case p.defaultGPUNum < 0 || p.defaultGPUNum > vgpuproto.MaxCards:
		return nil, fmt.Errorf("vgpu options: nvidia.defaultGPUNum=%d: want 0 to %d", cfg.DefaultGPUNum, vgpuproto.MaxCards)
	}
	return p, nil
}

func resourceOr(name, def string) v1.ResourceName {
	if name == "" {
		return v1.ResourceName(def)
	}
	return v1.ResourceName(name)
}

// Asks reports whether any container names a vGPU resource with a non-zero
// quantity.
func (p *Parser) Asks(pod *v1.Pod) bool {
	return podres.Asks(pod, p.ResCount, p.ResMemory, p.ResPercent, p.ResCores)
}

// RuleMask returns the exclusive rules the pod's labels match, one bit
// per rule.
func (p *Parser) RuleMask(pod *v1.Pod) uint64 {
	var m uint64
	for i, r := range p.rules {
		if r.Matches(pod.Labels) {
			m |= 1 << uint(i)
		}
	}
	return m
}

// Parse reads the pod's request and annotations into r under the global
// policy (deviceshare.SchedulePolicy). Pods without a request give an empty
// request and no error; a request no node could serve is an error naming
// the pod, the container, the resource or annotation, the value and what
// is allowed.
func (p *Parser) Parse(pod *v1.Pod, policy string, r *Pod) error {
	*r = Pod{Containers: len(pod.Spec.Containers), Host: hostUse(pod)}
	if err := p.parseInitContainers(pod, r); err != nil {
		return err
	}
	for i := range pod.Spec.Containers {
		c, ok, err := p.parseContainer(&pod.Spec.Containers[i])
		if err != nil {
			return fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
		}
		if ok {
			c.Entry = r.Inits + i
			r.add(c)
		}
	}
	if r.Empty() {
		return nil
	}
	if err := p.checkReuse(pod, r); err != nil {
		return fmt.Errorf("pod %s/%s %w", pod.Namespace, pod.Name, err)
	}
	if err := parseAnnotations(pod, policy, r); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.Rules = p.RuleMask(pod)
	r.fingerprint()
	return nil
}

// parseContainer reads one container's request; ok is false when it asks
// for no card.
func (p *Parser) parseContainer(c *v1.Container) (Container, bool, error) {
	var out Container
	r := podres.NewReader(c)
	n, hasN := r.Whole(p.ResCount, vgpuproto.MaxCards)
	mem, hasMem := r.Whole(p.ResMemory, vgpuproto.MaxMemoryMiB/p.Factor)
	pct, hasPct := r.Whole(p.ResPercent, 100)
	cores, hasCores := r.Whole(p.ResCores, FullCores)
	if err := r.Err(); err != nil {
		return out, false, err
	}
	if err := p.parsePriority(c); err != nil {
		return out, false, err
	}
	shaped := (hasMem && mem > 0) || (hasPct && pct > 0) || (hasCores && cores > 0)
	switch {
	case !hasN && !shaped:
		return out, false, nil
	case !hasN && p.defaultGPUNum == 0:
		return out, false, fmt.Errorf("container %q asks for vGPU memory or cores without %s, and nvidia.defaultGPUNum is 0: "+
			"set %s", c.Name, p.ResCount, p.ResCount)
	case !hasN:
		n = int64(p.defaultGPUNum)
	case n == 0 && shaped:
		return out, false, fmt.Errorf("container %q: %s=0 with vGPU memory or cores: want %s of at least 1",
			c.Name, p.ResCount, p.ResCount)
	case n == 0:
		return out, false, nil
	}
	out.Nums = int32(n)
	out.MemMiB = mem * p.Factor
	switch {
	case out.MemMiB > 0:
	case pct > 0:
		out.Pct = int32(pct)
	case p.defaultMemMiB > 0:
		out.MemMiB = p.defaultMemMiB
	default:
		out.Pct = 100
	}
	out.Cores = p.defaultCores
	if hasCores {
		out.Cores = int32(cores)
	}
	return out, true, nil
}

// parseAnnotations reads the selectors and policies of a pod that asks for
// cards.
func parseAnnotations(pod *v1.Pod, policy string, r *Pod) error {
	a := pod.Annotations
	switch m := a[vgpuproto.AnnotationMode]; m {
	case "", vgpuproto.ModeHAMiCore, vgpuproto.ModeMIG, vgpuproto.ModeMPS:
		r.Mode = m
	default:
		return fmt.Errorf("annotation %s=%q: want %s, %s or %s", vgpuproto.AnnotationMode, m, vgpuproto.ModeHAMiCore, vgpuproto.ModeMIG, vgpuproto.ModeMPS)
	}
	r.UseType = strings.ToUpper(a[vgpuproto.AnnotationUseType])
	r.NoUseType = strings.ToUpper(a[vgpuproto.AnnotationNoUseType])
	r.UseUUID, r.NoUseUUID = a[vgpuproto.AnnotationUseUUID], a[vgpuproto.AnnotationNoUseUUID]
	if policy != device.PolicySpread && policy != device.PolicyFragment {
		policy = device.PolicyBinpack
	}
	r.CardPolicy, r.NodePolicy = policy, policy
	switch p := a[vgpuproto.AnnotationGPUPolicy]; p {
	case "":
	case device.PolicyBinpack, device.PolicySpread, PolicyTopologyAware:
		r.CardPolicy = p
	default:
		return fmt.Errorf("annotation %s=%q: want %s, %s or %s", vgpuproto.AnnotationGPUPolicy, p,
			device.PolicyBinpack, device.PolicySpread, PolicyTopologyAware)
	}
	switch p := a[vgpuproto.AnnotationNodePolicy]; p {
	case "":
	case device.PolicyBinpack, device.PolicySpread:
		r.NodePolicy = p
	default:
		return fmt.Errorf("annotation %s=%q: want %s or %s", vgpuproto.AnnotationNodePolicy, p, device.PolicyBinpack, device.PolicySpread)
	}
	if v, ok := a[vgpuproto.AnnotationNUMABind]; ok && v != "" {
		bind, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("annotation %s=%q: want true or false", vgpuproto.AnnotationNUMABind, v)
		}
		r.NUMABind = bind
	}
	switch v := a[vgpuproto.AnnotationPodGroupPolicy]; v {
	case "":
	case vgpuproto.PodGroupPolicySpread:
		if g := a[AnnotationGroupName]; g != "" {
			r.Gang = gangKey(pod.Namespace, g)
		}
	default:
		return fmt.Errorf("annotation %s=%q: want %s or nothing", vgpuproto.AnnotationPodGroupPolicy, v, vgpuproto.PodGroupPolicySpread)
	}
	return nil
}
