// Package install puts a file in place on the node atomically: the agent
// image's `vgpu-device-plugin install-libvgpu` (the chart's install-libvgpu
// init container) copies libvgpu.so from the image into the host directory
// the agent mounts into vGPU containers. The image has no shell, so the
// copy, fsync, chmod and rename the chart used to run with /bin/sh happen
// here.
package install
