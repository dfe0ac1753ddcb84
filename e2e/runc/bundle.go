//go:build e2e

package runc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ldd prints "name => /path (addr)" and "/lib64/ld-linux... (addr)".
var lddPath = regexp.MustCompile(`(/[^ \t()]+)`)

// closure is files plus every shared object ldd says they load; a library
// among the files themselves (the stub libnvidia-ml needs the stub libcuda)
// is found through their directories.
func closure(files []string) ([]string, error) {
	seen := map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range files {
		dirs[filepath.Dir(f)] = true
	}
	var path []string
	for d := range dirs {
		path = append(path, d)
	}
	sort.Strings(path)
	for _, f := range files {
		seen[f] = true
		cmd := exec.Command("ldd", f)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+strings.Join(path, ":"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			// Not a dynamic object (a script, data, a static binary).
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("%s: %s", f, strings.TrimSpace(line))
			}
			for _, m := range lddPath.FindAllString(line, -1) {
				seen[m] = true
			}
		}
	}
	all := make([]string, 0, len(seen))
	for f := range seen {
		all = append(all, f)
	}
	sort.Strings(all)
	return all, nil
}

// buildRootfs makes a minimal root: the files with their libraries at their
// host paths, the mount points, and the directories a process expects.
func buildRootfs(root string, s Spec) error {
	srcs := append([]string{}, s.Files...)
	for _, c := range s.Copies {
		srcs = append(srcs, c.Host)
	}
	files, err := closure(srcs)
	if err != nil {
		return err
	}
	for _, c := range s.Copies {
		if err := copyFile(c.Host, filepath.Join(root, c.Container)); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := copyFile(f, filepath.Join(root, f)); err != nil {
			return err
		}
	}
	for _, d := range []string{"proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	for _, m := range s.Mounts {
		if err := mountPoint(root, m); err != nil {
			return err
		}
	}
	return nil
}

// mountPoint creates the target of a bind mount: a file for a file, a
// directory for a directory.
func mountPoint(root string, m Mount) error {
	st, err := os.Stat(m.Host)
	if err != nil {
		return fmt.Errorf("mount source %s: %w", m.Host, err)
	}
	target := filepath.Join(root, m.Container)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", m.Container, err)
	}
	if st.IsDir() {
		return os.MkdirAll(target, 0o755)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.Container, err)
	}
	return f.Close()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, st.Mode().Perm())
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// The OCI runtime spec, the fields used here (runtime-spec config.md).
type ociSpec struct {
	Version  string     `json:"ociVersion"`
	Process  ociProcess `json:"process"`
	Root     ociRoot    `json:"root"`
	Hostname string     `json:"hostname"`
	Mounts   []ociMount `json:"mounts"`
	Linux    ociLinux   `json:"linux"`
}

type ociProcess struct {
	Terminal        bool     `json:"terminal"`
	User            ociUser  `json:"user"`
	Args            []string `json:"args"`
	Env             []string `json:"env"`
	Cwd             string   `json:"cwd"`
	NoNewPrivileges bool     `json:"noNewPrivileges"`
}

type ociUser struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Namespaces    []ociNamespace `json:"namespaces"`
	Devices       []ociDevice    `json:"devices,omitempty"`
	Resources     *ociResources  `json:"resources,omitempty"`
	MaskedPaths   []string       `json:"maskedPaths"`
	ReadonlyPaths []string       `json:"readonlyPaths"`
}

type ociResources struct {
	Devices []ociDeviceRule `json:"devices"`
}

type ociDeviceRule struct {
	Allow  bool   `json:"allow"`
	Type   string `json:"type,omitempty"`
	Major  *int64 `json:"major,omitempty"`
	Minor  *int64 `json:"minor,omitempty"`
	Access string `json:"access"`
}

type ociNamespace struct {
	Type string `json:"type"`
}

type ociDevice struct {
	Path  string `json:"path"`
	Type  string `json:"type"`
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
}

// ociConfig composes the spec as the kubelet and containerd would: the
// container's own namespaces and /proc, a read-only root, the Allocate
// answer's mounts and environment, the device nodes that exist (allowed in
// the device cgroup, as the kubelet passes DeviceSpecs on).
func ociConfig(s Spec) ociSpec {
	mounts := []ociMount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
	}
	for _, m := range s.Mounts {
		opts := []string{"rbind", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, ociMount{Destination: m.Container, Type: "bind", Source: m.Host, Options: opts})
	}
	spec := ociSpec{
		Version:  "1.0.2",
		Process:  ociProcess{Args: s.Args, Env: s.Env, Cwd: "/", NoNewPrivileges: true},
		Root:     ociRoot{Path: "rootfs", Readonly: true},
		Hostname: s.ID,
		Mounts:   mounts,
		Linux: ociLinux{
			Namespaces:    []ociNamespace{{"pid"}, {"mount"}, {"ipc"}, {"uts"}},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	for _, d := range s.Devices {
		if dev, ok := deviceNode(d); ok {
			spec.Linux.Devices = append(spec.Linux.Devices, dev)
			if spec.Linux.Resources == nil {
				spec.Linux.Resources = &ociResources{}
			}
			spec.Linux.Resources.Devices = append(spec.Linux.Resources.Devices,
				ociDeviceRule{Allow: true, Type: "c", Major: &dev.Major, Minor: &dev.Minor, Access: "rwm"})
		}
	}
	return spec
}
