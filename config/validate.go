package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits checked by Validate.
const (
	// MaxDeviceSplitCount is the largest number of tasks that may share a card.
	MaxDeviceSplitCount = 1000
	// maxMIGSlices is the number of compute slices of the largest MIG GPU.
	maxMIGSlices = 7
)

// migProfileName matches MIG GPU-instance profile names such as 1g.5gb,
// 7g.79gb or 1g.10gb+me; the leading number is the compute slices used.
var migProfileName = regexp.MustCompile(`^([1-8])g\.[0-9]+gb(\+[a-z]+)?$`)

// Validate checks the whole configuration and returns every problem found,
// as an aggregate of field errors naming the path, the value and what is
// allowed, or nil. Resource names must be valid Kubernetes extended resource
// names and unique across the configuration.
func (c *Config) Validate() error {
	names := resourceNames{}
	var errs field.ErrorList
	errs = append(errs, c.NVIDIA.validate(field.NewPath("nvidia"), names)...)
	errs = append(errs, c.VNPUs.validate(field.NewPath("vnpus"), names)...)
	errs = append(errs, validateNodeConfigs(c.NodeConfigs, field.NewPath("nodeconfig"))...)
	return errs.ToAggregate()
}

func (n *NVIDIAConfig) validate(p *field.Path, names resourceNames) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, names.add(p.Child("resourceCountName"), n.ResourceCountName)...)
	errs = append(errs, names.add(p.Child("resourceMemoryName"), n.ResourceMemoryName)...)
	errs = append(errs, names.add(p.Child("resourceMemoryPercentageName"), n.ResourceMemoryPercentageName)...)
	errs = append(errs, names.add(p.Child("resourceCoreName"), n.ResourceCoreName)...)
	errs = append(errs, names.add(p.Child("resourcePriorityName"), n.ResourcePriorityName)...)

	errs = append(errs, atLeast(p.Child("defaultMemory"), int64(n.DefaultMemory), 0, "(MiB; 0 means the whole card)")...)
	errs = append(errs, between(p.Child("defaultCores"), int64(n.DefaultCores), 0, 100, "(percent of the card's SMs)")...)
	errs = append(errs, atLeast(p.Child("defaultGPUNum"), int64(n.DefaultGPUNum), 0, "(0 turns off adding a vGPU count)")...)
	errs = append(errs, between(p.Child("deviceSplitCount"), int64(n.DeviceSplitCount), 1, MaxDeviceSplitCount, "")...)
	errs = append(errs, positive(p.Child("deviceMemoryScaling"), n.DeviceMemoryScaling)...)
	errs = append(errs, positive(p.Child("deviceCoreScaling"), n.DeviceCoreScaling)...)
	errs = append(errs, atLeast(p.Child("gpuMemoryFactor"), int64(n.GPUMemoryFactor), 1, "")...)
	switch {
	case n.MemoryFactor < 0:
		errs = append(errs, atLeast(p.Child("memoryFactor"), int64(n.MemoryFactor), 1, "")...)
	case n.MemoryFactor > 0 && n.MemoryFactor != n.GPUMemoryFactor:
		errs = append(errs, field.Invalid(p.Child("memoryFactor"), n.MemoryFactor,
			fmt.Sprintf("must equal %s (%d) when both are set; memoryFactor is HAMi's name for it", p.Child("gpuMemoryFactor"), n.GPUMemoryFactor)))
	}
	errs = append(errs, atLeast(p.Child("preConfiguredDeviceMemory"), n.PreConfiguredDeviceMemory, 0, "(MiB; 0 turns it off)")...)
	switch n.GPUCorePolicy {
	case "", "default", "force", "disable":
	default:
		errs = append(errs, field.NotSupported(p.Child("gpuCorePolicy"), n.GPUCorePolicy, []string{"default", "force", "disable"}))
	}
	errs = append(errs, validateLogLevel(p.Child("libCudaLogLevel"), n.LibCudaLogLevel)...)
	errs = append(errs, validateRuntimeClass(p.Child("runtimeClassName"), n.RuntimeClassName)...)
	errs = append(errs, validateMIGGeometries(p.Child("knownMigGeometries"), n.KnownMIGGeometries)...)
	errs = append(errs, validateUnsupportedNVIDIA(p, n)...)
	return errs
}

func validateMIGGeometries(p *field.Path, list []AllowedMIGGeometries) field.ErrorList {
	var errs field.ErrorList
	firstEntry := map[string]*field.Path{}
	for i, entry := range list {
		ep := p.Index(i)
		if len(entry.Models) == 0 {
			errs = append(errs, field.Required(ep.Child("models"), "list at least one GPU model"))
		}
		inEntry := map[string]bool{}
		for j, model := range entry.Models {
			mp := ep.Child("models").Index(j)
			switch {
			case strings.TrimSpace(model) == "":
				errs = append(errs, field.Required(mp, "must be a GPU model name"))
			case inEntry[model]:
				// Upstream's own catalogue repeats a model inside one entry; harmless.
			case firstEntry[model] != nil:
				errs = append(errs, duplicate(mp, model, fmt.Sprintf("already listed at %s; the first entry that matches a card wins, so this one would never be used", firstEntry[model])))
			default:
				firstEntry[model] = mp
			}
			inEntry[model] = true
		}
		gp := ep.Child("allowedGeometries")
		if len(entry.Geometries) == 0 {
			errs = append(errs, field.Required(gp, "list at least one MIG layout"))
		}
		groups := map[string]bool{}
		for k, g := range entry.Geometries {
			if groups[g.Group] {
				errs = append(errs, duplicate(gp.Index(k).Child("group"), g.Group, "group names must be unique within an entry"))
			}
			groups[g.Group] = true
			errs = append(errs, validateMIGLayout(gp.Index(k), g)...)
		}
	}
	return errs
}

func validateMIGLayout(p *field.Path, g MIGGeometry) field.ErrorList {
	var errs field.ErrorList
	ip := p.Child("geometries")
	if strings.TrimSpace(g.Group) == "" {
		errs = append(errs, field.Required(p.Child("group"), "name the layout"))
	}
	if len(g.Instances) == 0 {
		errs = append(errs, field.Required(ip, "list the MIG instances of the layout"))
	}
	slices := int64(0)
	names := map[string]bool{}
	for l, t := range g.Instances {
		tp := ip.Index(l)
		m := migProfileName.FindStringSubmatch(t.Name)
		if m == nil {
			errs = append(errs, field.Invalid(tp.Child("name"), t.Name, "must be a MIG profile name like 1g.5gb or 3g.40gb"))
		} else {
			g, _ := strconv.Atoi(m[1])
			slices += int64(g) * int64(t.Count)
		}
		if names[t.Name] {
			errs = append(errs, duplicate(tp.Child("name"), t.Name, "list each profile once per layout and raise its count"))
		}
		names[t.Name] = true
		errs = append(errs, atLeast(tp.Child("memory"), int64(t.Memory), 1, "(MiB)")...)
		errs = append(errs, between(tp.Child("count"), int64(t.Count), 1, maxMIGSlices, "")...)
		errs = append(errs, between(tp.Child("core"), int64(t.Core), 0, 100, "(percent; 0 means not given)")...)
	}
	if slices > maxMIGSlices {
		errs = append(errs, field.Invalid(ip, slices, fmt.Sprintf("the layout uses %d compute slices; a GPU has at most %d", slices, maxMIGSlices)))
	}
	return errs
}

// resourceNames records where each resource name was used, to report names
// used twice anywhere in the configuration.
type resourceNames map[string]*field.Path

// add validates name as an extended resource name and records it.
func (r resourceNames) add(p *field.Path, name string) field.ErrorList {
	if errs := validateResourceName(p, name); len(errs) > 0 {
		return errs
	}
	if first, ok := r[name]; ok {
		return field.ErrorList{duplicate(p, name, fmt.Sprintf("already used by %s", first))}
	}
	r[name] = p
	return nil
}

// validateResourceName checks that name can be a Kubernetes extended
// resource: a qualified name with a domain prefix outside kubernetes.io.
func validateResourceName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "must be an extended resource name like example.com/gpu")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	prefix, _, found := strings.Cut(name, "/")
	switch {
	case !found:
		errs = append(errs, field.Invalid(p, name, "must have a domain prefix, like example.com/gpu (extended resources are domain-qualified)"))
	case prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io"):
		errs = append(errs, field.Invalid(p, name, "must not be in the kubernetes.io domain, which is reserved for native resources"))
	case strings.HasPrefix(name, "requests."):
		errs = append(errs, field.Invalid(p, name, "must not start with \"requests.\", which quota reserves"))
	}
	return errs
}

func validateRuntimeClass(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateLogLevel(p *field.Path, l LogLevel) field.ErrorList {
	if l.valid() {
		return nil
	}
	return field.ErrorList{field.Invalid(p, string(l), "must be a libvgpu log level from 0 to 4")}
}

func duplicate(p *field.Path, value any, detail string) *field.Error {
	e := field.Duplicate(p, value)
	e.Detail = detail
	return e
}

func between(p *field.Path, v, lo, hi int64, unit string) field.ErrorList {
	if v >= lo && v <= hi {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, strings.TrimSpace(fmt.Sprintf("must be between %d and %d %s", lo, hi, unit)))}
}

func atLeast(p *field.Path, v, lo int64, unit string) field.ErrorList {
	if v >= lo {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, strings.TrimSpace(fmt.Sprintf("must be >= %d %s", lo, unit)))}
}

func positive(p *field.Path, v float64) field.ErrorList {
	if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, "must be a number > 0")}
}
