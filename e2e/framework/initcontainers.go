//go:build e2e

package framework

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// ContainerKind is what kind of container of a pod a VGPUContainer is.
type ContainerKind int

const (
	// AppContainer is a regular container (pod.Spec.Containers).
	AppContainer ContainerKind = iota
	// InitContainer is a regular init container: it runs to completion
	// before the next one starts.
	InitContainer
	// SidecarContainer is a native sidecar: an init container with
	// restartPolicy Always, running beside everything after it.
	SidecarContainer
)

// VGPUContainer is one container of a pod asking for vGPUs: VGPUs cards of
// MemoryMiB and Cores percent each.
type VGPUContainer struct {
	Name                    string
	Kind                    ContainerKind
	VGPUs, MemoryMiB, Cores int64
}

// InitContainerCase is a pod whose init containers or sidecars ask for
// vGPUs, and what its card is charged when every container is on that one
// card: the most its containers running together hold of memory, cores
// and holders, each on its own (docs/architecture.md, "Init containers and
// sidecars"). Holders is also how many device IDs the kubelet keeps for the
// pod on the card. The same table serves the fake kubelet here and a real
// kubelet (run each case's pod there, collect each container's answer as a
// PodAllocation and compare with CheckContainerAnswers).
type InitContainerCase struct {
	Name string
	// Containers are in spec order within their kind; init containers and
	// sidecars keep their relative order.
	Containers []VGPUContainer
	// Want is what the card holds for the pod.
	WantMemMiB, WantCores int64
	WantHolders           int
}

// InitContainerCases are the pods the init container e2e tests run.
func InitContainerCases() []InitContainerCase {
	return []InitContainerCase{{
		// The init container's phase: 12000 MiB, 60 %, 1 holder; then the
		// sidecar (declared after it, so not beside it) and the app
		// container: 6000 MiB, 50 %, 2 holders.
		Name: "init-sidecar-app",
		Containers: []VGPUContainer{
			{Name: "warm", Kind: InitContainer, VGPUs: 1, MemoryMiB: 12000, Cores: 60},
			{Name: "proxy", Kind: SidecarContainer, VGPUs: 1, MemoryMiB: 2000, Cores: 20},
			{Name: "main", Kind: AppContainer, VGPUs: 1, MemoryMiB: 4000, Cores: 30},
		},
		WantMemMiB: 12000, WantCores: 60, WantHolders: 2,
	}, {
		// A sidecar started before the init container runs beside it:
		// 7000 MiB, 60 %, 2 holders; beside the app container 3000, 30, 2.
		Name: "sidecar-first",
		Containers: []VGPUContainer{
			{Name: "proxy", Kind: SidecarContainer, VGPUs: 1, MemoryMiB: 1000, Cores: 10},
			{Name: "warm", Kind: InitContainer, VGPUs: 1, MemoryMiB: 6000, Cores: 50},
			{Name: "main", Kind: AppContainer, VGPUs: 1, MemoryMiB: 2000, Cores: 20},
		},
		WantMemMiB: 7000, WantCores: 60, WantHolders: 2,
	}, {
		// Init containers one at a time: the largest memory (9000) and
		// the largest cores (80) come from different ones.
		Name: "two-inits",
		Containers: []VGPUContainer{
			{Name: "download", Kind: InitContainer, VGPUs: 1, MemoryMiB: 3000, Cores: 80},
			{Name: "convert", Kind: InitContainer, VGPUs: 1, MemoryMiB: 9000, Cores: 10},
			{Name: "main", Kind: AppContainer, VGPUs: 1, MemoryMiB: 1000, Cores: 5},
		},
		WantMemMiB: 9000, WantCores: 80, WantHolders: 1,
	}}
}

// VGPUContainersJob returns VGPUJob(namespace, name, task) whose pods have
// the containers ctrs instead of task's single container (task's VGPUs,
// MemoryMiB, Cores and Limits are not used).
func VGPUContainersJob(namespace, name string, task VGPUTask, ctrs []VGPUContainer) *batchv1alpha1.Job {
	job := VGPUJob(namespace, name, task)
	spec := &job.Spec.Tasks[0].Template.Spec
	base := spec.Containers[0]
	spec.Containers = nil
	for _, c := range ctrs {
		ctr := *base.DeepCopy()
		ctr.Name = c.Name
		limits := v1.ResourceList{vgpuproto.ResourceNumber: *resource.NewQuantity(c.VGPUs, resource.DecimalSI)}
		if c.MemoryMiB > 0 {
			limits[vgpuproto.ResourceMemory] = *resource.NewQuantity(c.MemoryMiB, resource.DecimalSI)
		}
		if c.Cores > 0 {
			limits[vgpuproto.ResourceCores] = *resource.NewQuantity(c.Cores, resource.DecimalSI)
		}
		ctr.Resources.Limits = limits
		switch c.Kind {
		case AppContainer:
			spec.Containers = append(spec.Containers, ctr)
		case SidecarContainer:
			always := v1.ContainerRestartPolicyAlways
			ctr.RestartPolicy = &always
			fallthrough
		default:
			ctr.Resources.Requests = nil // init containers ask nothing more of the node
			spec.InitContainers = append(spec.InitContainers, ctr)
		}
	}
	return job
}

// CheckContainerAnswers compares what the kubelet got for each container
// of pod (alloc: the fake kubelet's record, or one collected on a real
// node) with the pod's volcano.sh/vgpu-ids-new, and returns the
// differences:
//
//   - one answer per container with cards, in the kubelet's admission
//     order (init containers, then regular ones) and no other;
//   - each answer carries its own entry: NVIDIA_VISIBLE_DEVICES the entry's
//     cards, CUDA_DEVICE_MEMORY_LIMIT_<i> their memory, CUDA_DEVICE_SM_LIMIT
//     the cores;
//   - the device IDs the kubelet gave the container are of those cards
//     (deviceplugin.CardOf), reused ones included;
//   - per card, the kubelet holds as many device IDs for the pod as the
//     scheduler charges holders (vgpuproto.Peak).
func CheckContainerAnswers(pod *v1.Pod, alloc PodAllocation) []string {
	var diffs []string
	entries, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	if err != nil {
		return []string{fmt.Sprintf("pod %s/%s: %v", pod.Namespace, pod.Name, err)}
	}
	var order []string
	for i, devs := range entries {
		if len(devs) == 0 {
			continue
		}
		c, init := vgpuproto.EntryContainer(pod, len(entries), i)
		if c == nil {
			diffs = append(diffs, fmt.Sprintf("entry %d names no container", i))
			continue
		}
		order = append(order, c.Name)
		i := slices.IndexFunc(alloc.Containers, func(ca ContainerAllocation) bool { return ca.Container == c.Name })
		if i < 0 {
			diffs = append(diffs, fmt.Sprintf("container %s: no Allocate answer", c.Name))
			continue
		}
		ca := alloc.Containers[i]
		if ca.Init != init {
			diffs = append(diffs, fmt.Sprintf("container %s: admitted as init %v, its entry says %v", c.Name, ca.Init, init))
		}
		diffs = append(diffs, answerDiffs(c.Name, ca, devs)...)
	}
	var got []string
	for _, ca := range alloc.Containers {
		got = append(got, ca.Container)
	}
	if !slices.Equal(order, got) {
		diffs = append(diffs, fmt.Sprintf("answers for containers %v, want %v (the kubelet's admission order)", got, order))
	}
	holds := map[string]map[string]bool{}
	for _, ca := range alloc.Containers {
		for _, id := range ca.DeviceIDs {
			card := deviceplugin.CardOf(id)
			if holds[card] == nil {
				holds[card] = map[string]bool{}
			}
			holds[card][id] = true
		}
	}
	for _, ch := range vgpuproto.PeakOfEntries(vgpuproto.EntryRoles(pod, len(entries)), entries) {
		if n := len(holds[ch.Card]); n != int(ch.Holders) {
			diffs = append(diffs, fmt.Sprintf("card %s: the kubelet holds %d device IDs for the pod, the scheduler charges %d holders",
				ch.Card, n, ch.Holders))
		}
	}
	return diffs
}

// answerDiffs compares one container's answer with its entry.
func answerDiffs(name string, ca ContainerAllocation, devs []vgpuproto.Device) []string {
	var diffs []string
	if ca.Envs == nil {
		return []string{fmt.Sprintf("container %s: no answer (%s)", name, ca.Err)}
	}
	var uuids []string
	for j, d := range devs {
		uuids = append(uuids, d.UUID)
		key := "CUDA_DEVICE_MEMORY_LIMIT_" + strconv.Itoa(j)
		if got, want := ca.Envs[key], strconv.FormatInt(d.Mem, 10)+"m"; got != want {
			diffs = append(diffs, fmt.Sprintf("container %s: %s=%q, want %q", name, key, got, want))
		}
	}
	if got, want := ca.Envs["NVIDIA_VISIBLE_DEVICES"], strings.Join(uuids, ","); got != want {
		diffs = append(diffs, fmt.Sprintf("container %s: NVIDIA_VISIBLE_DEVICES=%q, want its cards %q", name, got, want))
	}
	if got, want := ca.Envs["CUDA_DEVICE_SM_LIMIT"], strconv.Itoa(int(devs[0].Cores)); got != want {
		diffs = append(diffs, fmt.Sprintf("container %s: CUDA_DEVICE_SM_LIMIT=%q, want %q", name, got, want))
	}
	var cards []string
	for _, id := range ca.DeviceIDs {
		cards = append(cards, deviceplugin.CardOf(id))
	}
	slices.Sort(cards)
	slices.Sort(uuids)
	if !slices.Equal(cards, uuids) {
		diffs = append(diffs, fmt.Sprintf("container %s: the kubelet gave device IDs %v (reused %v), of cards %v; want devices of its cards %v",
			name, ca.DeviceIDs, ca.Reused, cards, uuids))
	}
	return diffs
}
