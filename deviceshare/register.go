package deviceshare

import "volcano.sh/volcano/pkg/scheduler/framework"

// PluginName is the name the plugin registers under, replacing Volcano's
// built-in plugin of the same name.
const PluginName = "deviceshare"

// Register registers the plugin builder with Volcano's framework. Call it
// after volcano.sh/volcano/pkg/scheduler/plugins has been initialised so this
// registration overwrites the built-in one.
func Register() {
	framework.RegisterPluginBuilder(PluginName, New)
}

// New is a placeholder replaced by the plugin implementation.
func New(arguments framework.Arguments) framework.Plugin { return nil }
