package pluginargs

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
)

// PluginName is the plugin's name in volcano-scheduler.conf, which it
// registers under, replacing Volcano's built-in plugin of the same name.
const PluginName = "deviceshare"

// Argument keys, identical to upstream Volcano's deviceshare plugin.
const (
	ArgGPUSharingEnable            = "deviceshare.GPUSharingEnable"
	ArgGPUNumberEnable             = "deviceshare.GPUNumberEnable"
	ArgNodeLockEnable              = "deviceshare.NodeLockEnable"
	ArgNodeLockExpiry              = "deviceshare.NodeLockExpiry"
	ArgVGPUEnable                  = "deviceshare.VGPUEnable"
	ArgAscendMindClusterVNPUEnable = "deviceshare.AscendMindClusterVNPUEnable"
	ArgAscendHAMiVNPUEnable        = "deviceshare.AscendHAMiVNPUEnable"
	ArgSchedulePolicy              = "deviceshare.SchedulePolicy"
	ArgScheduleWeight              = "deviceshare.ScheduleWeight"
	ArgKnownGeometriesCMName       = "deviceshare.KnownGeometriesCMName"
	ArgKnownGeometriesCMNamespace  = "deviceshare.KnownGeometriesCMNamespace"
)

// Defaults for arguments that are absent.
const (
	DefaultSchedulePolicy = device.PolicyBinpack
	DefaultScheduleWeight = 1
	MaxScheduleWeight     = 100
	// MinNodeLockExpiry and MaxNodeLockExpiry bound deviceshare.NodeLockExpiry:
	// a lock must outlive a bind and the agent's Allocate, and a node must
	// not stay locked for longer than an operator would wait.
	MinNodeLockExpiry = time.Second
	MaxNodeLockExpiry = time.Hour
)

// Args are the validated plugin arguments.
type Args struct {
	GPUSharingEnable            bool
	GPUNumberEnable             bool
	NodeLockEnable              bool
	VGPUEnable                  bool
	AscendMindClusterVNPUEnable bool
	AscendHAMiVNPUEnable        bool
	// NodeLockExpiry is how long a node lock holds before it may be taken
	// over; 0 means nodelock.DefaultTTL (5 minutes, as upstream).
	NodeLockExpiry time.Duration
	// SchedulePolicy is binpack, spread or fragment; it decides both the
	// node score and the card picked inside a node.
	SchedulePolicy string
	// ScheduleWeight multiplies the device score in NodeOrderFn.
	ScheduleWeight int
	// ConfigMapName and ConfigMapNamespace locate the device ConfigMap.
	ConfigMapName      string
	ConfigMapNamespace string
	// ExclusiveRules is deviceshare.GPUExclusiveRules (see exclusive.go).
	ExclusiveRules []device.ExclusiveRule
}

// AnyEnabled reports whether any device type is enabled.
func (a Args) AnyEnabled() bool {
	return a.GPUSharingEnable || a.GPUNumberEnable || a.VGPUEnable ||
		a.AscendMindClusterVNPUEnable || a.AscendHAMiVNPUEnable
}

var boolArgs = []string{
	ArgGPUSharingEnable, ArgGPUNumberEnable, ArgNodeLockEnable, ArgVGPUEnable,
	ArgAscendMindClusterVNPUEnable, ArgAscendHAMiVNPUEnable,
}

// Parse reads and validates the plugin arguments. Every problem is
// reported, each naming the key, the value and what is allowed; on error the
// returned Args must not be used to serve requests.
func Parse(in map[string]interface{}) (Args, error) {
	a := Args{
		SchedulePolicy:     DefaultSchedulePolicy,
		ScheduleWeight:     DefaultScheduleWeight,
		ConfigMapName:      config.DefaultConfigMapName,
		ConfigMapNamespace: config.DefaultConfigMapNamespace,
	}
	var errs field.ErrorList
	bools := map[string]*bool{
		ArgGPUSharingEnable:            &a.GPUSharingEnable,
		ArgGPUNumberEnable:             &a.GPUNumberEnable,
		ArgNodeLockEnable:              &a.NodeLockEnable,
		ArgVGPUEnable:                  &a.VGPUEnable,
		ArgAscendMindClusterVNPUEnable: &a.AscendMindClusterVNPUEnable,
		ArgAscendHAMiVNPUEnable:        &a.AscendHAMiVNPUEnable,
	}
	for _, key := range boolArgs {
		if raw, ok := in[key]; ok {
			v, err := parseBool(raw)
			if err != nil {
				errs = append(errs, field.Invalid(field.NewPath(key), raw, err.Error()))
				continue
			}
			*bools[key] = v
		}
	}
	if raw, ok := in[ArgSchedulePolicy]; ok {
		s, isString := raw.(string)
		s = strings.ToLower(strings.TrimSpace(s))
		switch {
		case !isString:
			errs = append(errs, field.Invalid(field.NewPath(ArgSchedulePolicy), raw, "must be a string"))
		case s == "":
			// Empty keeps the default, as upstream treats an empty policy as unset.
		case s == device.PolicyBinpack || s == device.PolicySpread || s == device.PolicyFragment:
			a.SchedulePolicy = s
		default:
			errs = append(errs, field.NotSupported(field.NewPath(ArgSchedulePolicy), raw, []string{device.PolicyBinpack, device.PolicySpread, device.PolicyFragment}))
		}
	}
	if raw, ok := in[ArgScheduleWeight]; ok {
		w, err := parseInt(raw)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(ArgScheduleWeight), raw, err.Error()))
		case w < 0 || w > MaxScheduleWeight:
			errs = append(errs, field.Invalid(field.NewPath(ArgScheduleWeight), raw, fmt.Sprintf("must be between 0 and %d", MaxScheduleWeight)))
		default:
			a.ScheduleWeight = w
		}
	}
	if raw, ok := in[ArgNodeLockExpiry]; ok {
		d, err := parseDuration(raw)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(field.NewPath(ArgNodeLockExpiry), raw, err.Error()))
		case d == 0:
			// Zero or empty keeps the default.
		case d < MinNodeLockExpiry || d > MaxNodeLockExpiry:
			errs = append(errs, field.Invalid(field.NewPath(ArgNodeLockExpiry), raw,
				fmt.Sprintf("must be between %s and %s", MinNodeLockExpiry, MaxNodeLockExpiry)))
		default:
			a.NodeLockExpiry = d
		}
	}
	if raw, ok := in[ArgGPUExclusiveRules]; ok {
		rules, ruleErrs := parseExclusiveRules(raw)
		a.ExclusiveRules = rules
		errs = append(errs, ruleErrs...)
	}
	errs = append(errs, parseName(in, ArgKnownGeometriesCMName, &a.ConfigMapName, validation.IsDNS1123Subdomain)...)
	errs = append(errs, parseName(in, ArgKnownGeometriesCMNamespace, &a.ConfigMapNamespace, validation.IsDNS1123Label)...)

	if a.GPUSharingEnable && a.GPUNumberEnable {
		errs = append(errs, field.Forbidden(field.NewPath(ArgGPUNumberEnable),
			fmt.Sprintf("cannot be true together with %s: a card is either shared by memory or handed out whole", ArgGPUSharingEnable)))
	}
	if (a.GPUSharingEnable || a.GPUNumberEnable) && a.VGPUEnable {
		errs = append(errs, field.Forbidden(field.NewPath(ArgVGPUEnable),
			fmt.Sprintf("cannot be true together with %s or %s: both modes would hand out the same NVIDIA cards", ArgGPUSharingEnable, ArgGPUNumberEnable)))
	}
	if len(errs) > 0 {
		return a, errs.ToAggregate()
	}
	return a, nil
}

// UnknownKeys lists "deviceshare."-prefixed keys this plugin does not know,
// sorted, so a typo is reported instead of silently ignored.
func UnknownKeys(in map[string]interface{}) []string {
	known := map[string]bool{
		ArgSchedulePolicy: true, ArgScheduleWeight: true, ArgNodeLockExpiry: true,
		ArgKnownGeometriesCMName: true, ArgKnownGeometriesCMNamespace: true, ArgGPUExclusiveRules: true,
	}
	for _, k := range boolArgs {
		known[k] = true
	}
	var out []string
	for k := range in {
		if strings.HasPrefix(k, "deviceshare.") && !known[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func parseName(in map[string]interface{}, key string, dst *string, valid func(string) []string) field.ErrorList {
	raw, ok := in[key]
	if !ok {
		return nil
	}
	s, isString := raw.(string)
	if !isString {
		return field.ErrorList{field.Invalid(field.NewPath(key), raw, "must be a string")}
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if msgs := valid(s); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath(key), raw, strings.Join(msgs, "; "))}
	}
	*dst = s
	return nil
}

// parseBool accepts YAML booleans and the strings strconv.ParseBool accepts,
// since volcano-scheduler.conf users write both `true` and `"true"`.
func parseBool(raw interface{}) (bool, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, fmt.Errorf("must be true or false")
		}
		return b, nil
	default:
		return false, fmt.Errorf("must be true or false")
	}
}

// parseDuration accepts a Go duration string ("30s", "5m") or a whole
// number of seconds.
func parseDuration(raw interface{}) (time.Duration, error) {
	const want = `must be a duration such as "30s" or "5m", or a whole number of seconds`
	if s, ok := raw.(string); ok {
		s = strings.TrimSpace(s)
		if s == "" {
			return 0, nil
		}
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
	}
	secs, err := parseInt(raw)
	if err != nil {
		return 0, errors.New(want)
	}
	return time.Duration(secs) * time.Second, nil
}

func parseInt(raw interface{}) (int, error) {
	switch v := raw.(type) {
	case int:
		return v, nil
	case int64:
		return int(v), nil
	case float64:
		if v != float64(int(v)) {
			return 0, fmt.Errorf("must be a whole number")
		}
		return int(v), nil
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("must be a whole number")
		}
		return i, nil
	default:
		return 0, fmt.Errorf("must be a whole number")
	}
}
