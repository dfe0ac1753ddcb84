package fakedriver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// Names of the files a driver started with StartDeviceNodes creates in its
// directory, as the NVIDIA kernel driver's nodes are named in /dev.
const (
	// ControlNode is the control socket, what a container gets as
	// /dev/nvidiactl.
	ControlNode = "nvidiactl"
	// UVMNode stands for /dev/nvidia-uvm, which CUDA applications get
	// along with the control device.
	UVMNode = "nvidia-uvm"
	// cardNodePrefix + minor is a card's node (/dev/nvidia<minor>).
	cardNodePrefix = "nvidia"
)

// CardNode is the name of the node of the card with the minor number: what
// a container gets as /dev/nvidia<minor>.
func CardNode(minor int) string { return cardNodePrefix + strconv.Itoa(minor) }

// errNoAccess refuses a request on a card whose node the caller lacks.
var errNoAccess = requestError(reasonNoAccess)

// fileID identifies a file: the device it is on and its inode.
type fileID struct{ dev, ino uint64 }

// statID returns the identity of the file at path, following symbolic
// links as an open(2) of the path would.
func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// nodes are the device nodes of a driver started with StartDeviceNodes and
// the rule by which they gate its cards.
//
// On a real node a process reaches a GPU only through an open
// /dev/nvidia<minor>: the container runtime gives a container the nodes of
// the GPUs named in NVIDIA_VISIBLE_DEVICES and the kernel driver serves
// nothing else (the container toolkit reads the variable when it creates
// the container; libcuda and NVML inside never do). Here the nodes are
// files in the driver's directory, bind-mounted into containers, and the
// driver grants a connection a card when the caller's /dev/nvidia<minor>
// (through /proc/<pid>/root) is the driver's own node: same device and
// inode. A process in the driver's own mount namespace stands for a host
// process, whose /dev holds every card's node: it is granted every card.
type nodes struct {
	dir   string
	mntNS fileID         // the driver's mount namespace
	cards map[int]fileID // by minor number: the driver's card nodes
	paths []string       // every file created, removed by Close
}

// createNodes creates the control socket's directory, the UVM node and one
// node per card (empty files, mode 0444: only their identity matters) in
// dir, replacing what a driver that died left there.
func createNodes(dir string, fs []cards.Facts) (*nodes, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("device node directory %s: %w", dir, err)
	}
	ns, err := statID("/proc/self/ns/mnt")
	if err != nil {
		return nil, fmt.Errorf("own mount namespace: %w", err)
	}
	n := &nodes{dir: dir, mntNS: ns, cards: make(map[int]fileID, len(fs))}
	names := []string{UVMNode}
	for _, f := range fs {
		names = append(names, CardNode(f.Minor()))
	}
	for i, name := range names {
		id, err := n.create(name)
		if err != nil {
			n.remove()
			return nil, err
		}
		if i > 0 {
			n.cards[fs[i-1].Minor()] = id
		}
	}
	return n, nil
}

// create makes one node afresh: a new inode, so that a container that kept
// a node of an earlier driver is not granted this driver's card.
func (n *nodes) create(name string) (fileID, error) {
	path := filepath.Join(n.dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fileID{}, fmt.Errorf("replace device node %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return fileID{}, fmt.Errorf("create device node %s: %w", path, err)
	}
	f.Close()
	// The umask may have taken bits away; every uid must see the node.
	if err := os.Chmod(path, 0o444); err != nil {
		return fileID{}, fmt.Errorf("chmod device node %s: %w", path, err)
	}
	n.paths = append(n.paths, path)
	return statID(path)
}

// remove deletes the nodes created.
func (n *nodes) remove() error {
	var errs []error
	for _, p := range n.paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove device node: %w", err))
		}
	}
	return errors.Join(errs...)
}

// check grants process pid the card with the minor number, or refuses it.
func (n *nodes) check(pid, minor int) error {
	proc := "/proc/" + strconv.Itoa(pid)
	ns, err := statID(proc + "/ns/mnt")
	if err != nil {
		return errNoAccess // gone, or not ours to look at
	}
	if ns == n.mntNS {
		return nil
	}
	id, err := statInRoot(proc+"/root", "dev/"+CardNode(minor))
	if err != nil || id != n.cards[minor] {
		return errNoAccess
	}
	return nil
}

// statInRoot returns the identity of the file at path inside the root
// directory root, resolving symbolic links as a process chrooted there
// would (openat2 RESOLVE_IN_ROOT). Walking /proc/<pid>/root/... instead
// would resolve an absolute link against the driver's root, so a container
// could name the driver's node by its host path.
func statInRoot(root, path string) (fileID, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fileID{}, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fileID{}, fmt.Errorf("open %s in %s: %w", path, root, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, fmt.Errorf("stat %s in %s: %w", path, root, err)
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}
