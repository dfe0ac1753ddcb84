package allocate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/testroot"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// withUmask runs f with the process umask set to mask. Tests of this
// package do not run in parallel, so nothing else creates files meanwhile.
func withUmask(t *testing.T, mask int, f func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

// wantEntry checks path with Lstat (a symlink is not followed): its type,
// permission bits and owner (-1: the test's own user).
func wantEntry(t *testing.T, path string, dir bool, mode os.FileMode, uid, gid int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if fi.IsDir() != dir || (!dir && !fi.Mode().IsRegular()) {
		t.Errorf("%s: file type %v, want a directory: %t", path, fi.Mode().Type(), dir)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != mode {
		t.Errorf("%s: mode %#o, want %#o", path, got, mode)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if uid < 0 {
		uid = os.Geteuid()
	}
	if gid < 0 {
		gid = os.Getegid()
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s: owner %d:%d, want %d:%d", path, st.Uid, st.Gid, uid, gid)
	}
}

func int64p(v int64) *int64 { return &v }
func boolp(v bool) *bool    { return &v }

// Allocate leaves, whatever the umask, containers/ closed to other host
// users, the container's directory read-only to the container, and in it an
// empty region file that the container's user or group and the agent (any
// user when the pod names neither) can open read-write and the agent's
// read-only cards file, and nothing more.
func TestAllocateCreatesRegionWithNarrowModes(t *testing.T) {
	root := os.Geteuid() == 0
	tests := []struct {
		name     string
		pod      *v1.PodSecurityContext
		ctr      *v1.SecurityContext
		hostUser *bool
		// mode, uid and gid of the region file (-1: the agent's).
		mode     os.FileMode
		uid, gid int
	}{
		{name: "user unknown", mode: 0o666, uid: -1, gid: -1},
		{name: "pod runAsUser", pod: &v1.PodSecurityContext{RunAsUser: int64p(1000)}, mode: 0o660, uid: 1000, gid: -1},
		{name: "pod runAsUser and runAsGroup", pod: &v1.PodSecurityContext{RunAsUser: int64p(1000), RunAsGroup: int64p(3000)},
			mode: 0o660, uid: 1000, gid: -1},
		{name: "container overrides pod", pod: &v1.PodSecurityContext{RunAsUser: int64p(1000)},
			ctr: &v1.SecurityContext{RunAsUser: int64p(2000)}, mode: 0o660, uid: 2000, gid: -1},
		{name: "runAsGroup only", ctr: &v1.SecurityContext{RunAsGroup: int64p(3000)}, mode: 0o660, uid: -1, gid: 3000},
		{name: "user namespace", pod: &v1.PodSecurityContext{RunAsUser: int64p(1000)}, hostUser: boolp(false),
			mode: 0o666, uid: -1, gid: -1},
	}
	for _, umask := range []int{0, 0o022} {
		for _, tc := range tests {
			t.Run(tc.name+"/umask "+map[int]string{0: "0", 0o022: "022"}[umask], func(t *testing.T) {
				if !root && (tc.uid >= 0 || tc.gid >= 0) {
					testroot.Unavailable(t, "giving a file to another user needs root")
				}
				created := 0
				// the cache directory as the kubelet creates it, 0755
				e := newEnv(t, func(_ *config.Config, o *allocate.Options) { o.RegionCreated = func() { created++ } })
				withUmask(t, umask, func() {
					if err := allocate.WritePreload(e.cache); err != nil {
						t.Fatal(err)
					}
					pod := newPod("p").container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000}).
						allocated(entry(e.uuids[0], 1000, 0), 100).build()
					pod.Spec.SecurityContext, pod.Spec.Containers[0].SecurityContext, pod.Spec.HostUsers = tc.pod, tc.ctr, tc.hostUser
					e.add(t, pod)
					if _, err := e.alloc.Allocate(context.Background(), request(1)); err != nil {
						t.Fatalf("Allocate: %v", err)
					}
					wantEntry(t, filepath.Join(e.cache, "containers"), true, 0o700, -1, -1)
					dir := filepath.Join(e.cache, "containers", "uid-p_main")
					wantEntry(t, dir, true, 0o755, -1, -1)
					region := filepath.Join(dir, "region-1.cache")
					wantEntry(t, region, false, tc.mode, tc.uid, tc.gid)
					wantEntry(t, filepath.Join(e.cache, "ld.so.preload"), false, 0o644, -1, -1)
					if fi, err := os.Lstat(region); err == nil && fi.Size() != 0 {
						t.Errorf("region file has %d bytes, want an empty file for libvgpu to format", fi.Size())
					}
					// The cards file: the agent's, readable by all, naming the card.
					cards := filepath.Join(dir, "region-1"+allocate.CardsSuffix)
					wantEntry(t, cards, false, 0o644, -1, -1)
					if b, err := os.ReadFile(cards); err != nil || string(b) != e.uuids[0]+"\n" {
						t.Errorf("cards file %q (%v), want %q", b, err, e.uuids[0]+"\n")
					}
					if created != 1 {
						t.Errorf("RegionCreated called %d times, want once", created)
					}
					if names, _ := os.ReadDir(dir); len(names) != 2 {
						t.Errorf("container directory holds %d entries, want only the region and its cards file", len(names))
					}
				})
			})
		}
	}
}

// A container whose directory was writable (an older agent) may have
// planted symlinks, and another host user may have prepared paths: Allocate
// follows none of them and writes nothing through them.
func TestAllocateRefusesPlantedPaths(t *testing.T) {
	tests := []struct {
		name string
		// plant prepares cache (after WritePreload) with the target file
		// outside it that nothing may touch.
		plant func(t *testing.T, cache, target string)
	}{
		{"container directory is a symlink", func(t *testing.T, cache, target string) {
			symlink(t, filepath.Dir(target), filepath.Join(cache, "containers", "uid-p_main"))
		}},
		{"region file is a symlink", func(t *testing.T, cache, target string) {
			mkdir(t, filepath.Join(cache, "containers", "uid-p_main"))
			symlink(t, target, filepath.Join(cache, "containers", "uid-p_main", "region-1.cache"))
		}},
		{"region file is a dangling symlink", func(t *testing.T, cache, target string) {
			mkdir(t, filepath.Join(cache, "containers", "uid-p_main"))
			symlink(t, filepath.Join(filepath.Dir(target), "new"), filepath.Join(cache, "containers", "uid-p_main", "region-1.cache"))
		}},
		{"cards file is a symlink", func(t *testing.T, cache, target string) {
			mkdir(t, filepath.Join(cache, "containers", "uid-p_main"))
			symlink(t, target, filepath.Join(cache, "containers", "uid-p_main", "region-1"+allocate.CardsSuffix))
		}},
		{"region file exists", func(t *testing.T, cache, target string) {
			mkdir(t, filepath.Join(cache, "containers", "uid-p_main"))
			if err := os.WriteFile(filepath.Join(cache, "containers", "uid-p_main", "region-1.cache"), []byte("x"), 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"containers is a symlink", func(t *testing.T, cache, target string) {
			if err := os.RemoveAll(filepath.Join(cache, "containers")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Dir(target), filepath.Join(cache, "containers"))
		}},
		{"container directory owned by another user", func(t *testing.T, cache, target string) {
			if os.Geteuid() != 0 {
				testroot.Unavailable(t, "giving a directory to another user needs root")
			}
			mkdir(t, filepath.Join(cache, "containers", "uid-p_main"))
			if err := os.Chown(filepath.Join(cache, "containers", "uid-p_main"), 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}},
		{"container directory is a file", func(t *testing.T, cache, target string) {
			if err := os.WriteFile(filepath.Join(cache, "containers", "uid-p_main"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			created := 0
			e := newEnv(t, func(_ *config.Config, o *allocate.Options) { o.RegionCreated = func() { created++ } })
			withUmask(t, 0, func() {
				if err := allocate.WritePreload(e.cache); err != nil {
					t.Fatal(err)
				}
				outside := t.TempDir()
				target := filepath.Join(outside, "victim")
				if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
					t.Fatal(err)
				}
				tc.plant(t, e.cache, target)
				pod := newPod("p").container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000}).
					allocated(entry(e.uuids[0], 1000, 0), 100).build()
				e.add(t, pod)
				_, err := e.alloc.Allocate(context.Background(), request(1))
				wantCode(t, err, codes.FailedPrecondition)
				if !strings.Contains(err.Error(), allocate.ErrUnsafeCacheDir.Error()) {
					t.Errorf("Allocate: %v, want the cache directory refused", err)
				}
				data, rerr := os.ReadFile(target)
				fi, serr := os.Lstat(target)
				if rerr != nil || serr != nil || string(data) != "keep" || fi.Mode().Perm() != 0o600 {
					t.Errorf("the file outside the cache directory changed: %q %v %v %v", data, fi, rerr, serr)
				}
				if names, _ := os.ReadDir(outside); len(names) != 1 {
					t.Errorf("%d entries outside the cache directory, want only the untouched file", len(names))
				}
				if created != 0 {
					t.Errorf("RegionCreated called %d times for a refused region, want never", created)
				}
			})
		})
	}
}

// A directory an older agent left world-writable is repaired, not refused.
func TestAllocateRepairsAnOlderAgentsDirectory(t *testing.T) {
	e := newEnv(t)
	withUmask(t, 0, func() {
		dir := filepath.Join(e.cache, "containers", "uid-p_main")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		pod := newPod("p").container("main", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000}).
			allocated(entry(e.uuids[0], 1000, 0), 100).build()
		e.add(t, pod)
		if _, err := e.alloc.Allocate(context.Background(), request(1)); err != nil {
			t.Fatalf("Allocate: %v", err)
		}
		wantEntry(t, filepath.Join(e.cache, "containers"), true, 0o700, -1, -1)
		wantEntry(t, dir, true, 0o755, -1, -1)
	})
}

// The cache directory itself must be the agent's and closed to writes by
// others: one another host user prepared (say under /tmp before the agent
// first ran), or a shared one like /tmp, is refused at start.
func TestWritePreloadRefusesACacheDirOthersControl(t *testing.T) {
	t.Run("writable by others", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o1777); err != nil {
			t.Fatal(err)
		}
		if err := allocate.WritePreload(dir); !errors.Is(err, allocate.ErrUnsafeCacheDir) {
			t.Errorf("WritePreload(%s with mode 1777) = %v, want ErrUnsafeCacheDir", dir, err)
		}
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			testroot.Unavailable(t, "giving a directory to another user needs root")
		}
		dir := t.TempDir()
		if err := os.Chown(dir, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		if err := allocate.WritePreload(dir); !errors.Is(err, allocate.ErrUnsafeCacheDir) {
			t.Errorf("WritePreload(%s owned by uid 1000) = %v, want ErrUnsafeCacheDir", dir, err)
		}
	})
	t.Run("ld.so.preload replaced, not written through", func(t *testing.T) {
		withUmask(t, 0o077, func() {
			dir := t.TempDir()
			outside := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside, filepath.Join(dir, "ld.so.preload"))
			if err := allocate.WritePreload(dir); err != nil {
				t.Fatal(err)
			}
			wantEntry(t, filepath.Join(dir, "ld.so.preload"), false, 0o644, -1, -1)
			if data, _ := os.ReadFile(outside); string(data) != "keep" {
				t.Errorf("WritePreload wrote through a symlink: %q", data)
			}
			if data, _ := os.ReadFile(filepath.Join(dir, "ld.so.preload")); string(data) != allocate.ContainerLibPath+"\n" {
				t.Errorf("ld.so.preload = %q", data)
			}
			if names, _ := os.ReadDir(dir); len(names) != 2 {
				t.Errorf("cache directory holds %d entries, want containers/ and ld.so.preload", len(names))
			}
		})
	})
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
}
