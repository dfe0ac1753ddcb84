// Package deviceplugin is the kubelet side of a node agent: a gRPC server
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) on a unix socket in the
// kubelet's device-plugin directory, registered with the kubelet's
// Registration service for one resource (volcano.sh/vgpu-number for the
// NVIDIA agent, the chip type's resource for the simulated Ascend agent).
//
// The server advertises the devices the agent lists, for both agents Count
// virtual devices per card named "<UUID>-<i>" (VirtualDevices), and streams
// the list again through ListAndWatch whenever it changes (health,
// configuration). Allocate is delegated to the agent's Allocator. With a
// Preferrer the plugin also answers GetPreferredAllocation (and says so in
// its options): the Preferrer names the cards, PreferByCard turns them into
// an answer the kubelet takes whole (CheckPreferred), whatever they are.
//
// Run serves until its context ends. It watches the socket directory: when
// the kubelet restarts it wipes the directory and creates kubelet.sock again,
// and the plugin then starts a fresh server and registers again. On stop the
// server is stopped (gracefully, then forcibly) and its socket removed.
package deviceplugin
