package testkit

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// Devices is what the accounting checks need of a backend's state.
type Devices interface {
	device.Devices
	device.CardReporter
}

// Accounted is one pod accounted by Account, with the state before it.
type Accounted struct {
	d           Devices
	pod         *v1.Pod
	status      string
	usage       []device.CardUsage
	description string
}

// Account accounts the pod, whose record is in annotation, on d. When
// AddResource refuses it, Account checks that the error names the
// annotation (or one of alsoNamed, such as the resource a request is read
// from) and that the state did not change, and returns nil; the caller's
// fuzz target then stops.
func Account(t *testing.T, d Devices, pod *v1.Pod, annotation string, alsoNamed ...string) *Accounted {
	t.Helper()
	a := &Accounted{d: d, pod: pod, status: d.GetStatus(), usage: Usage(d), description: pod.Annotations[annotation]}
	if err := d.AddResource(pod); err != nil {
		if names := append([]string{annotation}, alsoNamed...); !slices.ContainsFunc(names, func(n string) bool {
			return strings.Contains(err.Error(), n)
		}) {
			t.Errorf("AddResource error %q names none of %q", err, names)
		}
		if after := d.GetStatus(); after != a.status {
			t.Errorf("a refused record %q changed the state:\n%s\n%s", a.description, a.status, after)
		}
		return nil
	}
	return a
}

// CheckRoundTrip checks that accounting the pod again is a no-op and that
// SubResource gives back exactly what it took: the per-card usage and the
// status are those before Account.
func (a *Accounted) CheckRoundTrip(t *testing.T) {
	t.Helper()
	if err := a.d.AddResource(a.pod); err != nil {
		t.Fatalf("AddResource of the same pod again: %v", err)
	}
	if err := a.d.SubResource(a.pod); err != nil {
		t.Fatalf("SubResource: %v", err)
	}
	if diff := cmp.Diff(a.usage, Usage(a.d)); diff != "" || a.d.GetStatus() != a.status {
		t.Errorf("AddResource then SubResource of %q is not the identity (-before +after):\n%s\n%s\n%s",
			a.description, diff, a.status, a.d.GetStatus())
	}
}
