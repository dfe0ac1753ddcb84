// Package sharedmem runs libvgpu's multi-process memory-sharing cases
// (libvgpu/test/t_share.c: CUDA IPC, VMM shareable descriptors over
// SCM_RIGHTS, peers with NVLink) with libvgpu's stub driver in remote mode
// against the fake GPU driver daemon (e2e/fakedriver), which keeps device
// memory as the kernel driver does, and judges by the daemon's peaks, not
// by libvgpu's own numbers. It has only tests.
package sharedmem
