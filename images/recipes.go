package images

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// recipe builds an image's inputs into work (a directory kept between
// builds) and says what the image is made of.
type recipe func(ctx context.Context, b *builder, work string) (imageSpec, error)

// recipeFor returns the recipe of a known image (Options checked the name).
func recipeFor(name string) recipe {
	switch name {
	case Scheduler:
		return schedulerImage
	case DevicePlugin:
		return devicePluginImage
	case Webhook:
		return webhookImage
	case Pause:
		return pauseImage
	default:
		return workloadImage
	}
}

// schedulerImage: the static scheduler on the static base, as the
// distroless static-debian12:nonroot image the Dockerfile used, minus what
// the binary never reads (see staticBase).
func schedulerImage(ctx context.Context, b *builder, work string) (imageSpec, error) {
	bin := filepath.Join(work, "vc-scheduler")
	err := goBuild(ctx, b.opts, goProgram{
		Pkg:     "./cmd/vc-scheduler",
		Out:     bin,
		LDFlags: "-s -w -X volcano.sh/volcano/pkg/version.Version=" + b.opts.Tag,
	})
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Layers: []layerSpec{
			staticBase(),
			{Comment: "vc-scheduler (./cmd/vc-scheduler, CGO_ENABLED=0)", Entries: []entry{file(SchedulerBinary, bin, 0o755)}},
		},
		Config: v1.Config{
			Entrypoint: []string{SchedulerBinary},
			User:       "65532:65532",
			WorkingDir: "/home/nonroot",
			Env:        []string{defaultPath},
		},
	}, nil
}

// webhookImage: the static admission webhook on the static base, non-root,
// as the scheduler (it reads only the API server, its flags and the
// scheduler's configuration file).
func webhookImage(ctx context.Context, b *builder, work string) (imageSpec, error) {
	bin := filepath.Join(work, "vshare-webhook")
	if err := goBuild(ctx, b.opts, goProgram{Pkg: "./cmd/vshare-webhook", Out: bin, LDFlags: "-s -w"}); err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Layers: []layerSpec{
			staticBase(),
			{Comment: "vshare-webhook (./cmd/vshare-webhook, CGO_ENABLED=0)", Entries: []entry{file(WebhookBinary, bin, 0o755)}},
		},
		Config: v1.Config{
			Entrypoint: []string{WebhookBinary},
			User:       "65532:65532",
			WorkingDir: "/home/nonroot",
			Env:        []string{defaultPath},
		},
	}, nil
}

// devicePluginImage: the agent (cgo: go-nvml dlopens the driver's
// libnvidia-ml.so.1, which the NVIDIA container runtime mounts) and
// libvgpu.so, both built against bullseye's glibc, on that glibc.
func devicePluginImage(ctx context.Context, b *builder, work string) (imageSpec, error) {
	s, err := b.sysroot(ctx)
	if err != nil {
		return imageSpec{}, err
	}
	bin := filepath.Join(work, "vgpu-device-plugin")
	err = goBuild(ctx, b.opts, goProgram{
		Pkg:     "./cmd/vgpu-device-plugin",
		Out:     bin,
		LDFlags: "-s -w",
		// os/user and the resolver in Go: cgo is for go-nvml only, and
		// the image needs no NSS modules.
		Tags:    []string{"osusergo", "netgo"},
		Sysroot: &s,
	})
	if err != nil {
		return imageSpec{}, err
	}
	if err := CheckGLIBC(bin, GLIBCFloor); err != nil {
		return imageSpec{}, err
	}
	lib := filepath.Join(work, "libvgpu.so")
	if err := buildLibvgpu(ctx, b.opts, s, lib); err != nil {
		return imageSpec{}, err
	}
	runtime, err := glibcRuntime(s)
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Layers: []layerSpec{
			runtime,
			{Comment: "libvgpu.so (libvgpu/, glibc " + GLIBCFloor + ")", Entries: []entry{file(LibvgpuPath, lib, 0o644)}},
			{Comment: "vgpu-device-plugin (./cmd/vgpu-device-plugin, cgo)", Entries: []entry{file(AgentBinary, bin, 0o755)}},
		},
		Config: v1.Config{Entrypoint: []string{AgentBinary}, Env: []string{defaultPath}},
	}, nil
}

// pauseImage: the pod sandbox's pause, alone, as registry.k8s.io/pause
// (FROM scratch, /pause, user 65535).
func pauseImage(ctx context.Context, b *builder, work string) (imageSpec, error) {
	bin := filepath.Join(work, "pause")
	if err := goBuild(ctx, b.opts, goProgram{Pkg: "./e2e/cmd/pause", Out: bin, LDFlags: "-s -w"}); err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Layers: []layerSpec{{Comment: "pause (./e2e/cmd/pause)", Entries: []entry{file(PauseBinary, bin, 0o755)}}},
		Config: v1.Config{Entrypoint: []string{PauseBinary}, User: "65535:65535"},
	}, nil
}

// workloadImage: the node-side tests' CUDA workload on bullseye's glibc.
// NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES=compute,utility
// are what NVIDIA's CUDA base images (nvidia/cuda) set, so the NVIDIA
// container runtime mounts the driver's CUDA and NVML libraries; see
// https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
// ("Environment variables (OCI spec)": the defaults of the CUDA images) and
// the images' Dockerfiles at https://gitlab.com/nvidia/container-images/cuda.
func workloadImage(ctx context.Context, b *builder, work string) (imageSpec, error) {
	s, err := b.sysroot(ctx)
	if err != nil {
		return imageSpec{}, err
	}
	bin := filepath.Join(work, "gpuworkload")
	if err := buildWorkload(ctx, b.opts, s, bin); err != nil {
		return imageSpec{}, err
	}
	runtime, err := glibcRuntime(s)
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Layers: []layerSpec{
			runtime,
			{Comment: "gpuworkload (e2e/testdata/gpuworkload.c)", Entries: []entry{file(WorkloadBinary, bin, 0o755)}},
		},
		Config: v1.Config{
			Entrypoint: []string{WorkloadBinary},
			Env: []string{defaultPath,
				"NVIDIA_VISIBLE_DEVICES=all",
				"NVIDIA_DRIVER_CAPABILITIES=compute,utility"},
		},
	}, nil
}

// staticBase is what the scheduler reads of distroless static's content:
//
//   - /etc/passwd and /etc/group with root, nobody and nonroot (65532):
//     os/user (klog names its log files after the user) reads them;
//   - /etc/nsswitch.conf: Go's resolver reads its hosts line;
//   - /tmp, 1777: klog's log files when --log-dir is not set;
//   - /home/nonroot, 0700, nonroot's: its home ($HOME, which the runtime
//     sets from /etc/passwd) and the working directory; Volcano's vGPU
//     device code looks for $HOME/.kube/config at start.
//
// Left out, because the binary never reads them: the CA bundle
// (ca-certificates; the scheduler talks only to the API server, with the
// service account's CA or the kubeconfig's; a kubeconfig relying on public
// roots can name a mounted bundle with SSL_CERT_FILE), /usr/share/zoneinfo
// (tzdata; no time.LoadLocation is reachable), /etc/services and
// /etc/protocols (netbase; read only for named ports and protocols, and
// every address the scheduler takes is numeric), /etc/mime.types
// (media-types), /etc/os-release, /var/lib/dpkg/status.d and the Debian
// copyright files (base-files, and the record of Debian packages this image
// does not contain), and /root.
func staticBase() layerSpec {
	return layerSpec{
		Comment: "static base: passwd, group, nsswitch.conf, /tmp, /home/nonroot",
		Entries: []entry{
			text("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"+
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
			text("/etc/group", "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"),
			text("/etc/nsswitch.conf", "hosts: files dns\n"),
			dir("/tmp", 0o777|os.ModeSticky),
			{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		},
	}
}

// glibcLibraries are the sonames the runtime layer carries: the loader,
// libc, and the libraries of glibc 2.31 that libvgpu.so, the agent, the
// workload and the driver's libraries (libcuda.so.1, libnvidia-ml.so.1:
// libpthread, libdl, libm, librt) name as NEEDED. glibc 2.34 merged the
// last four into libc; on 2.31 they are separate files.
func glibcLibraries() []string {
	return []string{"ld-linux-x86-64.so.2", "libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1"}
}

// glibcRuntime is the layer the agent and the workload share (same
// entries, same digest): glibcLibraries from the sysroot's libc6 (each
// soname link and its file), /lib64's loader link, the loader's
// configuration, glibc's copyright (LGPL: the image distributes it), and
// root's passwd and group, nsswitch.conf and /tmp.
func glibcRuntime(s Sysroot) (layerSpec, error) {
	libDir := "/lib/" + multiarch
	var es []entry
	add := func(p string) (entry, error) {
		e, err := sysrootEntry(s, p)
		if err == nil {
			es = append(es, e)
		}
		return e, err
	}
	for _, so := range glibcLibraries() {
		e, err := add(libDir + "/" + so)
		if err != nil {
			return layerSpec{}, err
		}
		if e.Link != "" {
			if _, err := add(path.Join(libDir, e.Link)); err != nil {
				return layerSpec{}, err
			}
		}
	}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/etc/ld.so.conf.d/" + multiarch + ".conf", "/usr/share/doc/libc6/copyright"} {
		if _, err := add(p); err != nil {
			return layerSpec{}, err
		}
	}
	es = append(es,
		// libc-bin's, which nvidia-container-cli's ldconfig reads when it
		// adds the driver's libraries to the container.
		text("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
		text("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"),
		text("/etc/group", "root:x:0:\n"),
		text("/etc/nsswitch.conf", "hosts: files dns\n"),
		dir("/tmp", 0o777|os.ModeSticky),
	)
	return layerSpec{Comment: "glibc " + s.GLIBC + " runtime (Debian bullseye libc6, debian.lock)", Entries: es}, nil
}

// sysrootEntry is the sysroot's file, link or directory at the image path
// p, with its mode.
func sysrootEntry(s Sysroot, p string) (entry, error) {
	host := filepath.Join(s.Dir, filepath.FromSlash(p))
	fi, err := os.Lstat(host)
	if err != nil {
		return entry{}, fmt.Errorf("glibc runtime: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return entry{}, fmt.Errorf("glibc runtime: %w", err)
		}
		return link(p, target), nil
	case fi.Mode().IsRegular():
		return file(p, host, fi.Mode().Perm()), nil
	default:
		return entry{}, fmt.Errorf("glibc runtime: %s is neither a file nor a link", host)
	}
}
