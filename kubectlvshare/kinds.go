package kubectlvshare

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/kubectlvshare/report"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// kind is one device type the plugin reads: its backend, the scheduler's
// own, and what only the plugin needs to know of it.
type kind struct {
	backend device.Backend
	// bindPhases are the pod annotations the device type's node agents move
	// from "allocating" to "success" or "failed", the first present read
	// (vGPU: volcano.sh/bind-phase, or hami.io/bind-phase on nodes HAMi's
	// plugin serves); none when it has none.
	bindPhases []string
	// shape builds a pod of the shape for `fit`; nil when `fit` does not
	// serve the device type.
	shape func(report.Shape) *v1.Pod
	// matches reports whether `fit --type` names this device type.
	matches func(typ string) bool
}

// name is the backend's name, which the scheduler's reasons and metrics
// use too ("hamivgpu", "Ascend910B3", "gpushare", "mindcluster310p").
func (k *kind) name() string { return k.backend.Name() }

// newKinds builds the device types the scheduler can serve, under the
// device configuration cfg (nil: the built-in defaults), with the
// scheduler's own registry (every type enabled, as backends/registry
// builds them for the plugin): HAMi vGPU, one HAMi Ascend type per vnpus
// entry, GPU share and MindCluster 310P (from nodes' annotations: kubectl
// reads no device-info ConfigMaps). GPU number mode reads the same cards as
// GPU share and is not listed twice. Ascend types come first for
// `fit --type`, whose vGPU type matches any model name.
func newKinds(cfg *config.Config) ([]*kind, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	all := pluginargs.Args{VGPUEnable: true, AscendHAMiVNPUEnable: true, GPUSharingEnable: true, AscendMindClusterVNPUEnable: true}
	backends, err := registry.Build(all, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("device configuration: %w", err)
	}
	var ascends, others []*kind
	for _, b := range backends {
		switch b := b.(type) {
		case *ascend.Backend:
			chipName := b.Chip().Name
			ascends = append(ascends, &kind{backend: b, bindPhases: []string{ascendproto.AnnotationBindPhase}, shape: ascendShape(b),
				matches: func(typ string) bool {
					return strings.EqualFold(typ, b.Name()) || (chipName != "" && strings.EqualFold(typ, chipName))
				}})
		case *vgpu.Backend:
			others = append(others, &kind{backend: b, bindPhases: []string{vgpuproto.AnnotationBindPhase, vgpuproto.AnnotationHAMiBindPhase},
				shape: vgpuShape(b), matches: func(string) bool { return true }})
		default:
			others = append(others, &kind{backend: b})
		}
	}
	// The registry builds GPU share first; `kubectl vshare` has always
	// listed vGPU first after the Ascend types.
	slices.SortStableFunc(others, func(x, y *kind) int { return kindRank(x) - kindRank(y) })
	return append(ascends, others...), nil
}

// kindRank orders the non-Ascend types: vGPU, GPU share, MindCluster.
func kindRank(k *kind) int {
	switch k.backend.(type) {
	case *vgpu.Backend:
		return 0
	case *gpushare.Backend:
		return 1
	}
	return 2
}

// fitPodName names the pod `fit` asks about.
const fitPodName = "kubectl-vshare-fit"

// shapePod returns a pod with one container asking for limits, with the
// annotations (key, value pairs; empty values are left out).
func shapePod(limits v1.ResourceList, annotations ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fitPodName, UID: fitPodName, Annotations: map[string]string{}},
		Spec: v1.PodSpec{SchedulerName: "volcano", Containers: []v1.Container{{Name: "main",
			Resources: v1.ResourceRequirements{Limits: limits}}}},
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		if annotations[i+1] != "" {
			pod.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return pod
}

// setPositive puts v into l under name when it is positive.
func setPositive(l v1.ResourceList, name v1.ResourceName, v int64) {
	if v > 0 {
		l[name] = *resource.NewQuantity(v, resource.DecimalSI)
	}
}

func vgpuShape(b *vgpu.Backend) func(report.Shape) *v1.Pod {
	count, memory, percent, cores := b.Resources()
	return func(s report.Shape) *v1.Pod {
		l := v1.ResourceList{count: *resource.NewQuantity(s.Number, resource.DecimalSI)}
		setPositive(l, memory, s.MemoryMiB)
		setPositive(l, percent, s.MemoryPercent)
		setPositive(l, cores, s.Cores)
		return shapePod(l, vgpuproto.AnnotationUseType, s.Type, vgpuproto.AnnotationMode, s.Mode)
	}
}

func ascendShape(b *ascend.Backend) func(report.Shape) *v1.Pod {
	count, memory, core := b.Resources()
	return func(s report.Shape) *v1.Pod {
		l := v1.ResourceList{count: *resource.NewQuantity(s.Number, resource.DecimalSI)}
		setPositive(l, memory, s.MemoryMiB)
		setPositive(l, core, s.Cores)
		return shapePod(l, ascendproto.AnnotationVNPUMode, s.Mode)
	}
}
