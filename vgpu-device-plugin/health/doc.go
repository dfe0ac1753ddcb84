// Package health watches the GPUs for critical NVML events and keeps the
// health of each card for the device plugin's ListAndWatch and the node
// registration.
//
// A Monitor registers an NVML event set for Xid critical errors and
// double-bit ECC errors on every card. A critical event marks the card
// unhealthy in the Tracker; application-level Xids (13, 31, 43, 45, 68, 109:
// errors a user's program causes, which leave the GPU usable) are ignored by
// default. Unlike the upstream plugins, an unhealthy card comes back: once no
// critical event has arrived for RecoveryAfter and NVML still answers for the
// card, it is reported healthy again.
//
// The environment variables of NVIDIA's k8s-device-plugin select the checks
// (see ParsePolicy): DP_DISABLE_HEALTHCHECKS ("all", "xids" or a list of
// Xids to ignore) and DP_ENABLE_HEALTHCHECKS ("all" or a list of Xids to
// treat as critical even though they are ignored by default).
package health
