//go:build e2e

package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestReusable: the devices the kubelet's device manager offers the next
// container (manager.go, Allocate): a regular init container's join them,
// a sidecar's or a regular container's leave them.
func TestReusable(t *testing.T) {
	init := func(ids ...string) ContainerAllocation { return ContainerAllocation{Init: true, DeviceIDs: ids} }
	sidecar := func(ids ...string) ContainerAllocation {
		return ContainerAllocation{Init: true, Sidecar: true, DeviceIDs: ids}
	}
	app := func(ids ...string) ContainerAllocation { return ContainerAllocation{DeviceIDs: ids} }
	tests := []struct {
		name string
		done []ContainerAllocation
		want []string
	}{
		{name: "nothing admitted yet"},
		{name: "a regular init container's devices", done: []ContainerAllocation{init("A-1", "B-0")}, want: []string{"A-1", "B-0"}},
		{name: "init containers reusing and adding", done: []ContainerAllocation{init("A-0"), init("A-0", "B-0")}, want: []string{"A-0", "B-0"}},
		{name: "a sidecar takes them for good", done: []ContainerAllocation{init("A-0"), sidecar("A-0")}},
		{name: "a sidecar before the init container takes nothing of it", done: []ContainerAllocation{sidecar("A-0"), init("A-1")}, want: []string{"A-1"}},
		{name: "a regular container takes them", done: []ContainerAllocation{init("A-0", "B-0"), app("A-0", "B-0", "C-0")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, reusable(tc.done), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("reusable (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmissionOrder: init containers, sidecars where they are declared,
// then regular containers; containers asking for nothing are left out.
func TestAdmissionOrder(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	asks := func(name string, n int64) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
			VGPUNumber: *resource.NewQuantity(n, resource.DecimalSI)}}}
	}
	side := asks("proxy", 1)
	side.RestartPolicy = &always
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{asks("warm", 1), {Name: "setup"}, side},
		Containers:     []v1.Container{asks("main", 2), asks("idle", 0)},
	}}
	want := []ContainerAllocation{{Container: "warm", Init: true}, {Container: "proxy", Init: true, Sidecar: true}, {Container: "main"}}
	if diff := cmp.Diff(want, admissionOrder(pod, VGPUNumber)); diff != "" {
		t.Errorf("admissionOrder (-want +got):\n%s", diff)
	}
}
