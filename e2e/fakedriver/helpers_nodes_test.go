package fakedriver_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Environment of the nodes helper.
const (
	envRoot     = "FAKEDRIVER_TEST_ROOT"     // the directory it makes its root
	envDev      = "FAKEDRIVER_TEST_DEV"      // what it puts in its /dev (devSetup)
	envRequests = "FAKEDRIVER_TEST_REQUESTS" // requests separated by ";"
)

// runNodesHelper is a container's process as far as the driver can tell:
// in a mount namespace of its own (the test starts it with CLONE_NEWNS)
// and chrooted into $FAKEDRIVER_TEST_ROOT, whose /dev is a tmpfs holding
// what $FAKEDRIVER_TEST_DEV lists, comma-separated:
//
//	bind=<host file>=<name>   the host file bind-mounted as /dev/<name>
//	file=<name>               an empty file it made itself
//	link=<target>=<name>      a symbolic link to target
//
// It connects to the driver before the chroot, as a container's process
// reaches a socket mounted into it, then prints one answer per request.
func runNodesHelper(socket string) error {
	root := os.Getenv(envRoot)
	dev := filepath.Join(root, "dev")
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, item := range strings.Split(os.Getenv(envDev), ",") {
		f := strings.Split(item, "=")
		var err error
		switch {
		case f[0] == "bind" && len(f) == 3:
			if err = os.WriteFile(filepath.Join(dev, f[2]), nil, 0o644); err == nil {
				err = unix.Mount(f[1], filepath.Join(dev, f[2]), "", unix.MS_BIND, "")
			}
		case f[0] == "file" && len(f) == 2:
			err = os.WriteFile(filepath.Join(dev, f[1]), nil, 0o444)
		case f[0] == "link" && len(f) == 3:
			err = os.Symlink(f[1], filepath.Join(dev, f[2]))
		default:
			err = fmt.Errorf("bad %s item %q", envDev, item)
		}
		if err != nil {
			return fmt.Errorf("/dev item %q: %w", item, err)
		}
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("connect %s: %w", socket, err)
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for _, req := range strings.Split(os.Getenv(envRequests), ";") {
		if _, err := fmt.Fprintf(c, "%s\n", req); err != nil {
			return fmt.Errorf("send %s: %w", req, err)
		}
		resp, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("answer to %s: %w", req, err)
		}
		fmt.Print(resp)
	}
	return nil
}
