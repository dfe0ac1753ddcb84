package allocate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

// Permissions of the agent's cache directory (docs/security.md). The agent
// (root on the node) owns every directory in it; containers reach their own
// directory only through its bind mount, which does not need the host
// path's parents to be traversable by the container's user.
const (
	// ContainersDirMode keeps every other host user out of containers/, so
	// no one but the agent reaches a region from the host.
	ContainersDirMode os.FileMode = 0o700
	// ContainerDirMode is a container's directory, mounted at
	// ContainerCacheDir: the container reads it but cannot create, rename
	// or delete entries, so it cannot plant a symlink for the agent (which
	// reads and writes the regions as root) to follow.
	ContainerDirMode os.FileMode = 0o755
	// RegionFileMode is the region file the agent creates for libvgpu when
	// the container's user is not known: whatever uid the image runs as may
	// open it read-write, as libvgpu must.
	RegionFileMode os.FileMode = 0o666
	// RegionSharedMode is the region's mode when the pod names the
	// container's user (runAsUser) or group (runAsGroup): the file is given
	// to that user (keeping the agent's group) or that group (keeping the
	// agent as owner), so the container and the agent reach it, the agent
	// without overriding file permissions, and nobody else does.
	RegionSharedMode os.FileMode = 0o660
	// PreloadFileMode is ld.so.preload, mounted read-only as every vGPU
	// container's /etc/ld.so.preload.
	PreloadFileMode os.FileMode = 0o644
)

// ErrUnsafeCacheDir: a path in the cache directory is not what the agent
// made (a symlink, another file type, another owner, a region file that
// already exists), so it is refused rather than followed or reused
// (codes.FailedPrecondition when Allocate refuses for it).
var ErrUnsafeCacheDir = allocation.NewRefusal(codes.FailedPrecondition, "unsafe cache directory")

// WritePreload prepares cacheHostDir at start: it checks that the directory
// belongs to the agent and that no other user can write to it (a directory
// planted in advance by another host user, e.g. under /tmp, is refused),
// creates containers/ (mode ContainersDirMode, repairing the mode of an
// existing one) and writes ld.so.preload naming libvgpu's path in the
// container (mode PreloadFileMode, replaced atomically: containers starting
// meanwhile read the old file or the new one, never a partial one).
func WritePreload(cacheHostDir string) error {
	root, err := openCacheRoot(cacheHostDir)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	cfd, err := ensureDir(root, cacheHostDir, ContainersDir, ContainersDirMode)
	if err != nil {
		return err
	}
	unix.Close(cfd)
	path := filepath.Join(cacheHostDir, PreloadFileName)
	tmp, err := os.CreateTemp(cacheHostDir, "."+PreloadFileName+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	_, err = tmp.WriteString(ContainerLibPath + "\n")
	if err == nil {
		err = tmp.Chmod(PreloadFileMode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ContainerDir is the host directory of one container's shared region.
func ContainerDir(cacheHostDir, podUID, container string) string {
	return filepath.Join(cacheHostDir, ContainersDir, podUID+"_"+container)
}

// regionOwner is who gets a container's region file.
type regionOwner struct {
	uid, gid int // -1: unchanged (the agent's)
	mode     os.FileMode
}

// ownerOf returns the region's owner and mode for the container: its
// runAsUser (the container's own, else the pod's) as owner, or failing
// that its runAsGroup as group, when the pod names them; every user
// otherwise. Pods in a user namespace (hostUsers: false) name ids inside
// it, which are not the host's, so they get the open mode too.
func ownerOf(pod *v1.Pod, ctr *v1.Container) regionOwner {
	open := regionOwner{uid: -1, gid: -1, mode: RegionFileMode}
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return open
	}
	var uid, gid *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := ctr.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	switch {
	case uid != nil:
		return regionOwner{uid: int(*uid), gid: -1, mode: RegionSharedMode}
	case gid != nil:
		return regionOwner{uid: -1, gid: int(*gid), mode: RegionSharedMode}
	}
	return open
}

// CardsSuffix names the file beside a region that lists the cards its
// container was given (CardsFile): until libvgpu formats the region with
// the UUIDs it sees, only this file tells the utilisation switch
// (monitor.Switcher) that the container is on those cards.
const CardsSuffix = ".cards"

// CardsFile is the name of region's cards file: "<id>.cache" gives
// "<id>.cards".
func CardsFile(region string) string {
	return strings.TrimSuffix(region, ".cache") + CardsSuffix
}

// createRegion creates the container's directory (mode ContainerDirMode,
// owned by the agent), in it the cards file (CardsFile: the UUIDs of cards,
// one per line, readable by everyone, owned by the agent) and then the empty
// region file libvgpu will size and format, given to owner. Nothing on the
// way is followed if it is a symlink, and neither file may exist yet (the
// region's name is new for every Allocate): a leftover of the container's
// previous life is refused, never reused. It returns the directory's host
// path.
func createRegion(cacheHostDir, podUID, container, file string, cards []string, owner regionOwner) (string, error) {
	name := podUID + "_" + container
	for _, n := range []string{name, file} {
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return "", fmt.Errorf("cache directory entry %q: not a plain file name: %w", n, ErrUnsafeCacheDir)
		}
	}
	root, err := openCacheRoot(cacheHostDir)
	if err != nil {
		return "", err
	}
	defer unix.Close(root)
	cfd, err := ensureDir(root, cacheHostDir, ContainersDir, ContainersDirMode)
	if err != nil {
		return "", err
	}
	defer unix.Close(cfd)
	dir := filepath.Join(cacheHostDir, ContainersDir, name)
	dfd, err := ensureDir(cfd, filepath.Join(cacheHostDir, ContainersDir), name, ContainerDirMode)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	// The cards file first: the switch counts a region it cannot read only
	// through it, so a region never appears without it.
	if err := writeNewFile(dfd, filepath.Join(dir, CardsFile(file)), CardsFile(file), []byte(strings.Join(cards, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	path := filepath.Join(dir, file)
	fd, err := createNew(dfd, "region "+path, file)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	mode := owner.mode
	if owner.uid >= 0 || owner.gid >= 0 {
		if err := unix.Fchown(fd, owner.uid, owner.gid); err != nil {
			// Only root (or CAP_CHOWN) can give files away; an agent
			// without it (tests, a rootless node) keeps the open mode.
			klog.V(2).InfoS("Cannot give the shared region to the container's user; leaving it open to every user of the container",
				"file", path, "uid", owner.uid, "gid", owner.gid, "err", err)
			mode = RegionFileMode
		}
	}
	if err := unix.Fchmod(fd, uint32(mode)); err != nil {
		return "", fmt.Errorf("set the mode of region %s: %w", path, err)
	}
	return dir, nil
}

// createNew creates name in the directory dfd, write-only, mode 0600, and
// returns its descriptor; it must not exist yet (ErrUnsafeCacheDir), and a
// symlink is not followed. what names it in errors.
func createNew(dfd int, what, name string) (int, error) {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("%s already exists: %w", what, ErrUnsafeCacheDir)
		}
		return -1, fmt.Errorf("create %s: %w", what, err)
	}
	return fd, nil
}

// writeNewFile creates name in the directory dfd (createNew; path is its
// full path, for errors) with mode and content.
func writeNewFile(dfd int, path, name string, content []byte, mode uint32) error {
	fd, err := createNew(dfd, path, name)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for len(content) > 0 {
		n, err := unix.Write(fd, content)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		content = content[n:]
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("set the mode of %s: %w", path, err)
	}
	return nil
}

// openCacheRoot opens the cache directory after checking that it is a
// directory of the agent's user that no other user can write to.
func openCacheRoot(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cache directory %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat cache directory %s: %w", path, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return -1, fmt.Errorf("cache directory %s is owned by uid %d with mode %#o; want the agent's (uid %d) and not writable by group or others: %w",
			path, st.Uid, st.Mode&0o7777, os.Geteuid(), ErrUnsafeCacheDir)
	}
	return fd, nil
}

// ensureDir creates name in the directory parent (whose path is parentPath,
// for messages) if it is missing, opens it without following a symlink,
// checks that it is a directory of the agent's user and sets its mode
// (repairing directories an older agent left wider). The caller closes the
// returned descriptor.
func ensureDir(parent int, parentPath, name string, mode os.FileMode) (int, error) {
	path := filepath.Join(parentPath, name)
	if err := unix.Mkdirat(parent, name, uint32(mode)); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("create %s: %w", path, err)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("%s is not a directory (a symlink or another file): %w", path, ErrUnsafeCacheDir)
		}
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat %s: %w", path, err)
	}
	if int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is owned by uid %d, not the agent's (uid %d): %w", path, st.Uid, os.Geteuid(), ErrUnsafeCacheDir)
	}
	if err := unix.Fchmod(fd, uint32(mode)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set the mode of %s: %w", path, err)
	}
	return fd, nil
}
