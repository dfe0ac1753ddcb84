package volcano

import (
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/conf"
	"volcano.sh/volcano/pkg/scheduler/framework"
	vcmetrics "volcano.sh/volcano/pkg/scheduler/metrics"
)

// Register puts the plugin builder under name in Volcano's plugin registry
// and makes binder the scheduler cache's binder. Both registries are
// process-wide and keep the last registration: under the name of a
// built-in plugin ("deviceshare") the builder replaces it when Register
// runs after volcano.sh/volcano/pkg/scheduler/plugins' init, and the
// binder replaces Volcano's default binder for every bind.
func Register(name string, builder framework.PluginBuilder, binder cache.Binder) {
	framework.RegisterPluginBuilder(name, builder)
	cache.RegisterBindMethod(binder)
}

// ObserveBound records a task's bind in Volcano's task schedule-duration
// metric, as Volcano's default binder does for the binds it makes.
func ObserveBound(task *vcapi.TaskInfo) {
	vcmetrics.UpdateTaskScheduleDuration(vcmetrics.Duration(task.Pod.CreationTimestamp.Time))
}

// EvictingActionsEnabled reports whether the scheduler configuration
// enables an action that evicts pods (preempt or reclaim). It is true when
// no configuration has been loaded (some tests), so that nothing relying on
// it is skipped by mistake.
func EvictingActionsEnabled() bool {
	m := conf.EnabledActionMap
	return m == nil || m["preempt"] || m["reclaim"]
}
