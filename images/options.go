package images

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// The images, by name.
const (
	// Scheduler is vc-scheduler: Volcano's scheduler with the deviceshare
	// plugin, static, non-root.
	Scheduler = "vc-scheduler"
	// DevicePlugin is vgpu-device-plugin: the NVIDIA node agent and
	// libvgpu.so on bullseye's glibc.
	DevicePlugin = "vgpu-device-plugin"
	// Webhook is vshare-webhook: the admission webhook, static, non-root.
	Webhook = "vshare-webhook"
	// Pause is the test-only pod sandbox image (e2e/cmd/pause).
	Pause = "pause"
	// CUDAWorkload is the test-only workload image (e2e/testdata/gpuworkload.c).
	CUDAWorkload = "cuda-workload"
)

// Paths inside the images.
const (
	SchedulerBinary = "/vc-scheduler"
	WebhookBinary   = "/vshare-webhook"
	AgentBinary     = "/usr/local/bin/vgpu-device-plugin"
	// LibvgpuPath is where the agent image carries libvgpu.so; the chart's
	// install-libvgpu init container copies it to the host.
	LibvgpuPath    = "/usr/local/vshare/lib/libvgpu.so"
	PauseBinary    = "/pause"
	WorkloadBinary = "/usr/local/bin/gpuworkload"
)

// DefaultRegistry is where the images are published.
const DefaultRegistry = "ghcr.io/vgpushare"

// Shipped are the images a release publishes.
func Shipped() []string { return []string{Scheduler, DevicePlugin, Webhook} }

// ForTests are the images only the end-to-end tests use.
func ForTests() []string { return []string{Pause, CUDAWorkload} }

// All are every image Build knows, shipped first.
func All() []string { return append(Shipped(), ForTests()...) }

// Options say what Build builds and where.
type Options struct {
	// Root is the module's checkout (holds go.mod). Required.
	Root string
	// OutDir receives <name>.tar per image; default <Root>/bin/images.
	OutDir string
	// Registry prefixes the image names; default DefaultRegistry.
	Registry string
	// Tag of every image (also vc-scheduler's version string). Required.
	Tag string
	// Names are the images to build; default All().
	Names []string
	// Log receives progress lines and the compilers' output; nil discards.
	Log io.Writer
	// CacheDir holds the downloaded Debian packages and the sysroot;
	// default $XDG_CACHE_HOME/vshare (os.UserCacheDir).
	CacheDir string
	// DebianMirror replaces debian.lock's mirror (for archive.debian.org).
	DebianMirror string
	// Created is every image's creation time and every file's mtime; the
	// zero value means the Unix epoch (SOURCE_DATE_EPOCH=0).
	Created time.Time
	// Go is the go command; default "go". CC is the C compiler; default
	// "gcc" (Debian's; the sysroot comes through its options).
	Go, CC string
	// Rebuild writes every archive even when its stamp says the one on
	// disk holds the same image.
	Rebuild bool
}

// Result is one built image.
type Result struct {
	Name string
	// Reference is <registry>/<name>:<tag>.
	Reference string
	// Archive is the OCI image layout tarball.
	Archive string
	// Digest is the manifest digest ("sha256:...").
	Digest string
	// Reused is true when the archive on disk already held this image and
	// was kept.
	Reused bool
}

// withDefaults fills the defaults and checks the options; errors name the
// field, the value and what is allowed.
func (o Options) withDefaults() (Options, error) {
	if o.Root == "" {
		return o, fmt.Errorf("images: Options.Root is empty: want the module's checkout")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return o, fmt.Errorf("images: Options.Root %q: %w", o.Root, err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return o, fmt.Errorf("images: Options.Root %q: want the module's checkout: %w", o.Root, err)
	}
	o.Root = root
	if o.OutDir == "" {
		o.OutDir = filepath.Join(root, "bin", "images")
	}
	if o.OutDir, err = filepath.Abs(o.OutDir); err != nil {
		return o, fmt.Errorf("images: Options.OutDir: %w", err)
	}
	if o.Registry == "" {
		o.Registry = DefaultRegistry
	}
	if _, err := name.NewRepository(o.Registry+"/"+Scheduler, name.StrictValidation); err != nil {
		return o, fmt.Errorf("images: Options.Registry %q: want a registry host and optional path: %w", o.Registry, err)
	}
	if _, err := name.NewTag(o.Registry+"/"+Scheduler+":"+o.Tag, name.StrictValidation); err != nil || o.Tag == "" {
		return o, fmt.Errorf("images: Options.Tag %q: want 1-128 of [A-Za-z0-9_.-], not starting with . or -", o.Tag)
	}
	if len(o.Names) == 0 {
		o.Names = All()
	}
	for _, n := range o.Names {
		if !slices.Contains(All(), n) {
			return o, fmt.Errorf("images: Options.Names: %q: want one of %v", n, All())
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.CacheDir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("images: Options.CacheDir is empty and there is no user cache directory: %w", err)
		}
		o.CacheDir = filepath.Join(c, "vshare")
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC().Truncate(time.Second)
	if o.Go == "" {
		o.Go = "go"
	}
	if o.CC == "" {
		o.CC = "gcc"
	}
	return o, nil
}

// reference is the image's full name.
func (o Options) reference(image string) (name.Tag, error) {
	return name.NewTag(o.Registry+"/"+image+":"+o.Tag, name.StrictValidation)
}
