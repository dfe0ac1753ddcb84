// Package images builds vshare's container images without a container
// engine, the way ko does: the programs are compiled here, each image's
// layers are tars written by this package, and go-containerregistry puts
// them together as OCI images, written as OCI image layout tarballs
// (`ctr images import`, `skopeo copy oci-archive:`, or Push to a registry).
//
// The images (Options.Names, All):
//
//   - vc-scheduler: the static scheduler (./cmd/vc-scheduler) on a static
//     base, non-root (65532), what distroless static's nonroot image gave
//     the scheduler and nothing it never reads (recipes.go, staticBase);
//   - vgpu-device-plugin: the node agent (./cmd/vgpu-device-plugin, cgo)
//     and /usr/local/vshare/lib/libvgpu.so on a glibc runtime layer;
//   - pause: the pod sandbox for the end-to-end tests (./e2e/cmd/pause);
//   - cuda-workload: the node-side tests' workload
//     (e2e/testdata/gpuworkload.c) on the same glibc runtime layer.
//
// The glibc floor: libvgpu.so is preloaded into users' containers, whatever
// their distribution, so it is built against glibc 2.31 (Debian bullseye)
// and loads with that or newer. The C parts (libvgpu.so, the agent's cgo,
// the workload) compile against a sysroot of bullseye's packages pinned by
// version and SHA256 in debian.lock, downloaded from deb.debian.org into
// the user's cache and unpacked with dpkg-deb (sysroot.go); the runtime
// layer's glibc is the same packages' (recipes.go, glibcRuntime). CheckGLIBC
// refuses a file that needs a newer glibc symbol version.
//
// Reproducible: the same checkout, Go toolchain and C compiler give the
// same image digests. Every layer is written with sorted entries, one
// mtime (Options.Created, default the Unix epoch), numeric owners only;
// Go programs are built with -trimpath and a fixed environment, C with
// the build directory and the sysroot mapped to fixed names (compile.go).
//
// Build keeps an archive whose image did not change (stamp.go), so a
// call with nothing changed costs the go command's up-to-date checks and
// the C compiles.
package images
