// Package agent is a simulated HAMi Ascend node agent for tests and the
// demo. It behaves like HAMi's Ascend device plugin
// (github.com/Project-HAMi/ascend-device-plugin) towards the scheduler and
// the kubelet, with chips described by flags instead of read from the
// driver:
//
//   - Registration: the node annotations hami.io/node-register-<commonWord>
//     (a JSON list of HAMi device.DeviceInfo, encoded by
//     protocol/ascendproto.EncodeRegister) and hami-vnpu-core ("true" in
//     hami-core mode), patched only when they differ from the node; and
//     the handshake hami.io/node-handshake-<commonWord> =
//     "Reported_<time>", renewed every handshake interval (the real plugin
//     renews it every 30 s) and at once when a scheduler writes
//     "Requesting_..." or "Deleted_...".
//   - The kubelet device-plugin API for the chip type's resourceName on
//     <kubelet-socket-dir>/<commonWord>.sock: ListAndWatch lists count
//     virtual devices "<UUID>-<i>" per chip, as the real plugin does.
//   - Allocate: finds the pod bound to the node whose bind-phase is
//     allocating and whose next unserved container in
//     hami.io/<commonWord>-devices-to-allocate has as many cards as the
//     kubelet asks for, among the pods pending when the request came
//     (nodeagent/allocation.Arrivals: the informer's, else the journal's
//     account of what reached the informer since, else a list from the
//     API server; a pod bound after the request came has its own request
//     coming), checks the cards against the node and the runtime
//     info huawei.com/<commonWord>, answers with ASCEND_VISIBLE_DEVICES
//     (the chips' physical IDs) plus ASCEND_VNPU_SPECS (template mode) or
//     the hami-vnpu-core environment and mounts (hami-core mode), and
//     consumes the container's entry. When no entry is left it sets
//     hami.io/bind-phase to success and releases the node lock
//     hami.io/mutex.lock; a refused allocation sets it to failed and
//     releases the lock, as HAMi's PodAllocationFailed does.
//
// Refusals are gRPC statuses: PermissionDenied for annotations this node
// cannot have written (a pod bound elsewhere, another node in
// hami.io/vgpu-node, chips the node does not have), FailedPrecondition for
// stale allocations (bind-time older than the allocation timeout),
// unhealthy chips and pods no longer allocating, NotFound when no pod
// waits for the request, InvalidArgument for device IDs the agent never
// advertised.
//
// # Running one simulated node
//
// The chip type's commonWord selects a vnpus entry of the device
// configuration (--config-file, else the ConfigMap
// kube-system/volcano-vgpu-device-config read once at start, else the
// built-in catalogue); flags size the chips:
//
//	vnpu-agent --node-name=npu-node-1 --chip=Ascend910B3 --chips=8 \
//	  --kubeconfig=$KUBECONFIG --kubelet-socket-dir=$NODE_DIR/dp \
//	  --handshake-interval=5s -v=4
//
// --mode=hami-core makes the node slice softly whatever the configuration
// says; --split-count, --memory-mib, --ai-cores, --numa, --network-ids and
// --unhealthy shape the chips.
//
// The kubelet device-plugin server, the registrar (with HAMi's Renew
// handshake), the Allocate bookkeeping and the common flags are the node
// agent kit's (nodeagent); this package holds the chips and the HAMi
// protocol's checks and responses.
package agent
