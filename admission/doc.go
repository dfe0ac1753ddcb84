// Package admission is the sharing stack's admission webhook: what a pod
// may not do to get around a share, decided before it exists.
//
// Policy holds the decisions. Mutate (the mutating webhook, pods on
// CREATE) sets NVIDIA_VISIBLE_DEVICES=none (ASCEND_VISIBLE_DEVICES=none)
// on containers that ask for no share when the device configuration's
// overwriteEnv is on, since CUDA base images set
// NVIDIA_VISIBLE_DEVICES=all and the NVIDIA container runtime would give
// such a container every card whole; gives pods asking for a share the
// scheduler (only Volcano with deviceshare can place one) and the
// configuration's runtimeClassName. Validate (the validating webhook,
// pods and the pod templates of Deployments, StatefulSets, DaemonSets,
// ReplicaSets, Jobs, CronJobs and Volcano Jobs) parses every request with
// the scheduler's own backends (registry.Build, the same
// ValidateRequest and messages), and refuses a share in a privileged
// container, in a hostPID pod, beside CUDA_DISABLE_CONTROL, or under a
// mount over the paths the agent mounts, and any hostPath volume at,
// above or below the agent's host directories. docs/security.md gives the
// reasons and what is left to Pod Security Admission.
//
// A container "asks for a share" when a backend's HasDeviceRequest says so
// of a pod holding that container alone: the backends' resource names and
// annotations are read in one place.
//
// Handler speaks AdmissionReview v1 on /mutate and /validate. SelfSigned
// keeps the serving certificate in a Secret, from a CA of its own, renewed
// with a third of its validity left, and writes the CA bundle into the
// webhook configurations (the chart leaves caBundle empty and keeps what
// is there on upgrade); Files serves cert-manager's instead.
package admission
