package kubectlvshare

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/backends/mindcluster"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
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
// device configuration cfg (nil: the built-in defaults): HAMi vGPU, one
// HAMi Ascend type per vnpus entry, GPU share and MindCluster 310P. GPU
// number mode reads the same cards as GPU share and is not listed twice.
func newKinds(cfg *config.Config) ([]*kind, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	vb, err := vgpu.New(vgpu.Options{Config: &cfg.NVIDIA})
	if err != nil {
		return nil, fmt.Errorf("device configuration: %w", err)
	}
	out := []*kind{{backend: vb, bindPhases: []string{vgpuproto.AnnotationBindPhase, vgpuproto.AnnotationHAMiBindPhase}, shape: vgpuShape(vb), matches: func(string) bool { return true }}}
	hamiCore := cfg.VNPUs.Mode() == config.VNPUModeHAMiCore
	var ascends []*kind
	for _, chip := range cfg.VNPUs.Configs {
		ab, err := ascend.New(ascend.Options{Chip: chip, HAMiCore: hamiCore})
		if err != nil {
			return nil, fmt.Errorf("device configuration: %w", err)
		}
		chipName := chip.ChipName
		ascends = append(ascends, &kind{backend: ab, bindPhases: []string{ascendproto.AnnotationBindPhase}, shape: ascendShape(ab),
			matches: func(typ string) bool {
				return strings.EqualFold(typ, ab.Name()) || (chipName != "" && strings.EqualFold(typ, chipName))
			}})
	}
	// Ascend types come first for `fit --type`, whose vGPU type matches any
	// model name.
	out = append(ascends, out...)
	gb, err := gpushare.New(gpushare.Options{Mode: gpushare.ModeShare})
	if err != nil {
		return nil, err
	}
	out = append(out, &kind{backend: gb}, &kind{backend: mindcluster.New(mindcluster.Options{})})
	return out, nil
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
