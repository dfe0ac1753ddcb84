package quality

import "fmt"

// FactoryFor returns the factory of a reference policy, one of ours or
// one of Volcano's built-in vGPU device.
func FactoryFor(name string) (Factory, error) {
	if f := reference(name); f != nil {
		return f, nil
	}
	if f := ours(name); f != nil {
		return f, nil
	}
	if f := builtin(name); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("policy %q: want one of %v, %v, %v or the ablation %s", name, ReferencePolicies(), OurPolicies(), BuiltinPolicies(), PolicyFragmentGPUOnly)
}
