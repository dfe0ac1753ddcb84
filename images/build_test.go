package images

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/vgpushare/vshare/vgpu-device-plugin/install"
)

// logWriter sends a build's progress to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestBuildIsReproducible builds every image twice from this checkout into
// two directories (the C parts compiled again, in other temporary
// directories; the Go programs linked again from the go command's cache)
// and wants the same digests, naming the layer and the files that differ
// otherwise. A third build into the first directory keeps every archive.
// Then it checks what each image holds.
//
// The first of the two builds may be one already made: with
// VSHARE_IMAGES_BUILT naming the directory `make images` wrote from this
// checkout and VSHARE_IMAGES_TAG its tag (make test passes its images
// stage's), the test builds into that directory again, which takes its
// archives as they are (and rebuilds any that this checkout would not
// produce), and builds only the second from scratch.
func TestBuildIsReproducible(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	tag, firstDir := "test", t.TempDir()
	if dir := os.Getenv("VSHARE_IMAGES_BUILT"); dir != "" {
		tag, firstDir = os.Getenv("VSHARE_IMAGES_TAG"), dir
		if tag == "" {
			t.Fatalf("VSHARE_IMAGES_BUILT=%s without VSHARE_IMAGES_TAG: the tag the images were built with", dir)
		}
	}
	build := func(out string) map[string]Result {
		t.Helper()
		start := time.Now()
		res, err := Build(ctx, Options{Root: root, OutDir: out, Tag: tag, Log: logWriter{t}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Build into %s: %s", out, time.Since(start).Round(time.Second))
		return res
	}
	first, second := build(firstDir), build(t.TempDir())
	for _, n := range All() {
		if first[n].Digest != second[n].Digest {
			t.Errorf("%s: digests %s and %s from the same checkout", n, first[n].Digest, second[n].Digest)
			diffImages(t, first[n].Archive, second[n].Archive)
		}
	}
	again := build(filepath.Dir(first[Scheduler].Archive))
	for _, n := range All() {
		if !again[n].Reused || again[n].Digest != first[n].Digest {
			t.Errorf("%s built again with nothing changed: reused %v, digest %s (was %s)", n, again[n].Reused, again[n].Digest, first[n].Digest)
		}
	}
	checkImages(t, first, tag)
}

// diffImages reports which layers of two images differ, and in them which
// files.
func diffImages(t *testing.T, a, b string) {
	t.Helper()
	epoch := time.Unix(0, 0)
	cfA, _, filesA := readImage(t, a, epoch)
	cfB, _, filesB := readImage(t, b, epoch)
	if diff := cmp.Diff(cfA.Config, cfB.Config); diff != "" {
		t.Errorf("configurations differ (-%s +%s):\n%s", a, b, diff)
	}
	for i := range cfA.RootFS.DiffIDs {
		if i < len(cfB.RootFS.DiffIDs) && cfA.RootFS.DiffIDs[i] == cfB.RootFS.DiffIDs[i] {
			continue
		}
		t.Errorf("layer %d (%s) differs", i, cfA.History[i].CreatedBy)
		for p, fa := range filesA {
			fb, ok := filesB[p]
			switch {
			case fa.Layer != i:
			case !ok:
				t.Errorf("  %s only in %s", p, a)
			case !bytes.Equal(fa.Content, fb.Content):
				t.Errorf("  %s: content differs (%d and %d bytes)", p, len(fa.Content), len(fb.Content))
			case fa.Header.Mode != fb.Header.Mode || fa.Header.Uid != fb.Header.Uid || fa.Header.Linkname != fb.Header.Linkname:
				t.Errorf("  %s: header differs: %+v and %+v", p, fa.Header, fb.Header)
			}
		}
	}
}

// checkImages checks what each image holds and how it runs.
func checkImages(t *testing.T, res map[string]Result, tag string) {
	epoch := time.Unix(0, 0)
	configs := map[string]*v1.ConfigFile{}
	for _, n := range All() {
		t.Run(n, func(t *testing.T) {
			cf, ann, files := readImage(t, res[n].Archive, epoch)
			configs[n] = cf
			want := map[string]string{AnnotationRefName: tag, AnnotationContainerdRef: DefaultRegistry + "/" + n + ":" + tag}
			if diff := cmp.Diff(want, ann); diff != "" {
				t.Errorf("index.json annotations (-want +got):\n%s", diff)
			}
			for p, f := range files {
				if (f.Header.Uid != 0 || f.Header.Gid != 0) && p != "/home/nonroot" {
					t.Errorf("%s owned by %d:%d, want root", p, f.Header.Uid, f.Header.Gid)
				}
			}
			if _, ok := files["/bin/sh"]; ok {
				t.Error("the image has a shell")
			}
			switch n {
			case Scheduler:
				checkScheduler(t, cf, files)
			case DevicePlugin:
				checkAgent(t, cf, files)
			case Pause:
				if cf.Config.User != "65535:65535" || !slices.Equal(cf.Config.Entrypoint, []string{PauseBinary}) || len(files) != 1 {
					t.Errorf("pause: user %q, entrypoint %q, %d files; want 65535:65535, [/pause] and only /pause", cf.Config.User, cf.Config.Entrypoint, len(files))
				}
				checkStatic(t, files[PauseBinary])
			case CUDAWorkload:
				checkWorkload(t, cf, files)
			}
		})
	}
	agent, workload := configs[DevicePlugin], configs[CUDAWorkload]
	if agent != nil && workload != nil && agent.RootFS.DiffIDs[0] != workload.RootFS.DiffIDs[0] {
		t.Errorf("the agent's and the workload's glibc layers differ (%s, %s), want one layer shared", agent.RootFS.DiffIDs[0], workload.RootFS.DiffIDs[0])
	}
}

func checkScheduler(t *testing.T, cf *v1.ConfigFile, files map[string]imageFile) {
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{SchedulerBinary}) {
		t.Errorf("user %q, entrypoint %q; want 65532:65532 and [%s]", cf.Config.User, cf.Config.Entrypoint, SchedulerBinary)
	}
	if f := files[SchedulerBinary]; f.Header == nil || f.Header.Mode != 0o755 {
		t.Errorf("%s missing or not 0755", SchedulerBinary)
	}
	checkStatic(t, files[SchedulerBinary])
	if f := files["/tmp"]; f.Header == nil || f.Header.Mode != 0o1777 {
		t.Error("/tmp missing or not 1777")
	}
	if f := files["/home/nonroot"]; f.Header == nil || f.Header.Uid != 65532 || f.Header.Mode != 0o700 {
		t.Error("/home/nonroot missing, not nonroot's, or not 0700")
	}
	if !strings.Contains(string(files["/etc/passwd"].Content), "\nnonroot:x:65532:65532:") ||
		!strings.Contains(string(files["/etc/group"].Content), "\nnonroot:x:65532:") {
		t.Error("/etc/passwd or /etc/group do not name nonroot 65532")
	}
}

func checkAgent(t *testing.T, cf *v1.ConfigFile, files map[string]imageFile) {
	if !slices.Equal(cf.Config.Entrypoint, []string{AgentBinary}) || cf.Config.User != "" {
		t.Errorf("entrypoint %q user %q, want [%s] as root", cf.Config.Entrypoint, cf.Config.User, AgentBinary)
	}
	if install.DefaultSource != LibvgpuPath {
		t.Errorf("install-libvgpu's default source %s, the image has libvgpu.so at %s", install.DefaultSource, LibvgpuPath)
	}
	if f := files[LibvgpuPath]; f.Header == nil || f.Header.Mode != 0o644 {
		t.Fatalf("%s missing or not 0644", LibvgpuPath)
	}
	for _, p := range []string{AgentBinary, LibvgpuPath} {
		if err := CheckGLIBC(extract(t, files, p), GLIBCFloor); err != nil {
			t.Error(err)
		}
	}
	if _, ok := resolveFile(files, "/lib64/ld-linux-x86-64.so.2"); !ok {
		t.Error("no loader at /lib64/ld-linux-x86-64.so.2")
	}
}

func checkWorkload(t *testing.T, cf *v1.ConfigFile, files map[string]imageFile) {
	if !slices.Equal(cf.Config.Entrypoint, []string{WorkloadBinary}) {
		t.Errorf("entrypoint %q, want [%s]", cf.Config.Entrypoint, WorkloadBinary)
	}
	for _, env := range []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"} {
		if !slices.Contains(cf.Config.Env, env) {
			t.Errorf("environment %q lacks %s", cf.Config.Env, env)
		}
	}
	if err := CheckGLIBC(extract(t, files, WorkloadBinary), GLIBCFloor); err != nil {
		t.Error(err)
	}
}

// checkStatic: the file is an ELF executable without a program
// interpreter (statically linked).
func checkStatic(t *testing.T, f imageFile) {
	t.Helper()
	if f.Header == nil {
		t.Fatal("binary missing")
	}
	e, err := elf.NewFile(bytes.NewReader(f.Content))
	if err != nil {
		t.Fatalf("%s: %v", f.Header.Name, err)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", f.Header.Name)
		}
	}
}

// extract writes an image file to a temporary file for the ELF checks.
func extract(t *testing.T, files map[string]imageFile, p string) string {
	t.Helper()
	f, ok := files[p]
	if !ok {
		t.Fatalf("%s missing", p)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(p))
	if err := os.WriteFile(out, f.Content, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// resolveFile follows symbolic links among an image's files.
func resolveFile(files map[string]imageFile, p string) (imageFile, bool) {
	for hops := 0; hops < 16; hops++ {
		f, ok := files[p]
		if !ok {
			return imageFile{}, false
		}
		if f.Header.Linkname == "" {
			return f, true
		}
		if strings.HasPrefix(f.Header.Linkname, "/") {
			p = f.Header.Linkname
		} else {
			p = filepath.Join(filepath.Dir(p), f.Header.Linkname)
		}
	}
	return imageFile{}, false
}
