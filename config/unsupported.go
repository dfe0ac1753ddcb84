package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Keys that upstream's or HAMi's documents carry but that this project does
// not implement are parsed (so the document's shape is still checked) and
// then refused here, unless they hold the value the product's behaviour
// already matches. An operator who sets one must not believe it holds: the
// error names the key, the value, says it is not supported and what to do
// instead. The scheduler and the node agents all read the document through
// Parse, so they refuse the same documents with the same messages.

// validateUnsupportedNVIDIA refuses the nvidia: keys nothing acts on.
func validateUnsupportedNVIDIA(p *field.Path, n *NVIDIAConfig) field.ErrorList {
	var errs field.ErrorList
	if len(n.MIGProfileAllowlist) > 0 {
		entries := make([]string, len(n.MIGProfileAllowlist))
		for i, e := range n.MIGProfileAllowlist {
			entries[i] = fmt.Sprintf("models %v profiles %v", e.Models, e.Profiles)
		}
		errs = append(errs, unsupported(p.Child("migProfileAllowlist"), strings.Join(entries, "; "),
			fmt.Sprintf("not supported: MIG instances are placed by the layouts of %s, which no allowlist restricts; "+
				"keep only the layouts you allow there for these models and remove the key", p.Child("knownMigGeometries"))))
	}
	return errs
}

// validateUnsupportedVNPUs refuses the vnpus: keys nothing acts on.
func validateUnsupportedVNPUs(p, configs *field.Path, v *VNPUs) field.ErrorList {
	var errs field.ErrorList
	if v.Mode() == VNPUModeENPU {
		errs = append(errs, unsupported(p.Child("hamiVnpuMode"), v.HAMiVNPUMode,
			"not supported: HAMi's ENPU mode is not implemented (chips would be sliced by templates instead); "+
				supportedValues(VNPUModeTemplate, VNPUModeHAMiCore, "hamiCore")))
	}
	if v.ENPUPolicy != "" {
		errs = append(errs, unsupported(p.Child("enpuPolicy"), v.ENPUPolicy,
			"not supported: HAMi's ENPU mode is not implemented; remove the key"))
	}
	for i := range v.Configs {
		if v.Configs[i].SuperPod {
			errs = append(errs, unsupported(configs.Index(i).Child("superPod"), true,
				"not supported: requests for super-pod chips are not rounded up to whole modules (HAMi's webhook does that); "+
					"ask for chips in pairs and remove the key, or set it to false"))
		}
	}
	return errs
}

// validateUnsupportedNode refuses the nodeconfig[] keys whose other values
// nothing acts on: the vGPU node agent exposes no MIG devices of its own
// (migstrategy none), and always answers GetPreferredAllocation.
func validateUnsupportedNode(p *field.Path, o *NodeConfig) field.ErrorList {
	var errs field.ErrorList
	switch o.MIGStrategy {
	case "", MIGStrategyNone:
	case MIGStrategySingle, MIGStrategyMixed:
		errs = append(errs, unsupported(p.Child("migstrategy"), o.MIGStrategy,
			"not supported: the node agent never exposes MIG devices as resources of their own "+
				"(with operatingmode: mig it creates the MIG instances the scheduler places); "+
				supportedValues(MIGStrategyNone)+" (or leave the key out)"))
	default:
		errs = append(errs, field.NotSupported(p.Child("migstrategy"), o.MIGStrategy, []string{MIGStrategyNone}))
	}
	if o.EnableGetPreferredAllocation != nil && !*o.EnableGetPreferredAllocation {
		errs = append(errs, unsupported(p.Child("enablegetpreferredallocation"), false,
			"not supported: the node agent always answers GetPreferredAllocation, so that the device IDs the kubelet "+
				"records name the cards the scheduler chose; leave the key out or set it to true"))
	}
	return errs
}

// unsupported is a NotSupported error whose detail says why and what to do.
func unsupported(p *field.Path, value any, detail string) *field.Error {
	e := field.NotSupported[string](p, value, nil)
	e.Detail = detail
	return e
}

// supportedValues spells the values a key does support, as
// field.NotSupported does.
func supportedValues(values ...string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	return "supported values: " + strings.Join(quoted, ", ")
}
