// Package bind is the deviceshare plugin's bind side: what runs on
// Volcano's bind goroutine after a session has decided where a pod's cards
// are.
//
// The Binder replaces Volcano's default binder: it puts the decided
// allocation annotations on the v1.Binding (the API server copies them onto
// the pod), takes node locks where the bind happens and refuses binds whose
// allocation failed, or was made on a node inventory a later session has
// seen replaced (InventoryView, the plugin node state's generations). For device
// types whose node agent serves the oldest pending pod (device.OrderedAgent)
// it binds one pod per node at a time, or, where the node's agent tells
// pods apart by what the kubelet asks (device.AgentClasser: this project's
// vGPU agent, by card count), one per node and agent class (serial.go,
// agentTurns): a bind waits until the pods its turns wait for are served — the pod bound last, a pod
// whose bind request ended without an answer, and, once per process, the
// pods a previous scheduler process left pending (Inherit).
//
// Each allocation is recorded once, as a Decision in Decisions: the
// session records it, the bind claims it (Claim), and the plugin's node state
// accounts an assumed one until the informer shows the pod carrying it or
// the pod leaves its node; one rule ends every decision (see Decisions).
//
// The plugin hands a Binder what it needs (Options: the clock, the
// node state's view, the counters); this package imports neither the plugin
// nor any backend.
//
// TEST ONLY: VSHARE_TEST_CRASH_AT_BIND (crashhook.go), read once when the
// Binder is created and inert when unset, makes the process exit at a
// chosen Bind call or right before a chosen bind request: the e2e fault
// campaign's scheduler-crash-mid-session and TestSchedulerCrashMidSession.
// It exists only in binaries built with the vsharetest build tag, as the
// e2e framework builds the scheduler it runs; release builds (images/, make
// build) compile the inert twin crashhook_release.go instead, and
// TestReleaseSchedulerHasNoCrashHook checks the built binary. Its own unit
// tests run with go test -tags vsharetest ./deviceshare/bind/.
package bind
