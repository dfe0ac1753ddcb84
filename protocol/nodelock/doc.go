// Package nodelock implements the node lock that upstream Volcano and HAMi
// node agents expect while a device allocation is in flight: a node
// annotation whose key names the device type and whose value is the time the
// lock was taken (RFC 3339; HAMi appends ",<namespace>,<pod>"). A lock older
// than its TTL (DefaultTTL, 5 minutes, unless the caller sets another) is
// expired and may be taken over. The scheduler takes the lock
// just before it binds the pod; the node agent removes it once its Allocate
// has served the pod.
//
// Acquire uses optimistic concurrency (an update carrying the node's
// resourceVersion), so two schedulers cannot both believe they hold it, and
// it never waits: a held lock is reported at once and the caller skips the
// node.
package nodelock
