package quality

import "fmt"

// FactoryFor returns the factory of a reference policy or one of ours.
func FactoryFor(name string) (Factory, error) {
	if f := reference(name); f != nil {
		return f, nil
	}
	if f := ours(name); f != nil {
		return f, nil
	}
	return nil, fmt.Errorf("policy %q: want one of %v or %v", name, ReferencePolicies(), OurPolicies())
}
