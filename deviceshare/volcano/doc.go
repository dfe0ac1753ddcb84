// Package volcano is deviceshare's port to the Volcano scheduler it is
// built into (v1.10.0): everything that reaches behind Volcano's plugin API
// or depends on how v1.10 behaves inside, so that moving to another Volcano
// release changes this package and nothing else of the plugin.
//
// deviceshare uses Volcano's plugin API (framework.Session and its
// Add*Fn registrations, api.TaskInfo, api.NodeInfo, api.JobInfo and their
// IDs, statuses and fit errors) directly, as any plugin does. What is here:
//
//   - builtin.go: the go:linkname hook into the package-level API client of
//     Volcano's built-in vGPU device code, which the scheduler cache still
//     runs for every node (SilenceBuiltinVGPU, BuiltinVGPUClient,
//     SetBuiltinVGPUClient).
//   - register.go: the plugin builder and binder registries (Register), the
//     default binder's metrics (ObserveBound) and the scheduler
//     configuration's global action map (EvictingActionsEnabled).
//   - session.go: the session and NodeInfo adapters: walking a session's
//     tasks by status, a node's terminating pods and its idle resources,
//     whether the allocate action binds or pipelines a task, and the two
//     places where deviceshare writes into Volcano's session objects (a
//     job's fit errors, a task's request for queue accounting).
//
// docs/architecture.md ("Porting to a newer Volcano") lists each Volcano
// API used here with its v1.10.0 signature and what later releases change.
package volcano
