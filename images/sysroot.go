package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Sysroot is the pinned Debian packages of debian.lock unpacked into one
// directory, as a C compiler's --sysroot and the source of the glibc
// runtime layer. It is built once per lock into the cache directory and
// never changed afterwards.
type Sysroot struct {
	// Dir holds the unpacked packages (lib/, usr/include, ...).
	Dir string
	// GLIBC is the pinned libc6 version (2.31-13+deb11u14).
	GLIBC string
}

// multiarch is Debian's library directory name for amd64.
const multiarch = "x86_64-linux-gnu"

// CC returns the C compiler command line (compiler and its options, split
// on spaces by make and by the go command) that compiles and links against
// the sysroot only. gcc's --sysroot alone is not enough with Debian's
// native compiler: it still takes crt1.o and friends, and libraries named
// by -l, from the host's /usr/lib/x86_64-linux-gnu first; -B and -L put the
// sysroot's ahead.
func (s Sysroot) CC(gcc string) string {
	return strings.Join([]string{gcc,
		"--sysroot=" + s.Dir,
		"-B" + filepath.Join(s.Dir, "usr/lib", multiarch) + "/",
		"-L" + filepath.Join(s.Dir, "lib", multiarch),
		"-L" + filepath.Join(s.Dir, "usr/lib", multiarch),
	}, " ")
}

// Loader is the sysroot's dynamic loader, which runs a program on the
// sysroot's glibc: Loader --library-path LibraryPath() program.
func (s Sysroot) Loader() string {
	return filepath.Join(s.Dir, "lib64", "ld-linux-x86-64.so.2")
}

// LibraryPath lists the sysroot's library directories, for the loader's
// --library-path.
func (s Sysroot) LibraryPath() string {
	return filepath.Join(s.Dir, "lib", multiarch) + ":" + filepath.Join(s.Dir, "usr/lib", multiarch)
}

// PrepareSysroot returns the sysroot of debian.lock under cacheDir,
// downloading (from mirror, or the lock's when empty) and unpacking what
// is missing. Each package is checked against its SHA256 before use.
// Concurrent callers are safe: the sysroot appears by one rename.
func PrepareSysroot(ctx context.Context, cacheDir, mirror string, log io.Writer) (Sysroot, error) {
	l, err := parseLock(debianLock)
	if err != nil {
		return Sysroot{}, err
	}
	if mirror == "" {
		mirror = l.Mirror
	}
	libc, ok := l.find("libc6")
	if !ok {
		return Sysroot{}, errors.New("debian.lock: no libc6")
	}
	sum := sha256.New()
	for _, d := range l.Debs {
		fmt.Fprintln(sum, d.SHA256)
	}
	root := Sysroot{
		Dir:   filepath.Join(cacheDir, "sysroot", hex.EncodeToString(sum.Sum(nil))[:16]),
		GLIBC: libc.Version,
	}
	if _, err := os.Stat(root.Dir); err == nil {
		return root, nil
	}
	files := make([]string, len(l.Debs))
	for i, d := range l.Debs {
		if files[i], err = fetchDeb(ctx, d, filepath.Join(cacheDir, "debs"), mirror, log); err != nil {
			return Sysroot{}, err
		}
	}
	parent := filepath.Dir(root.Dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Sysroot{}, fmt.Errorf("sysroot: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".unpack-")
	if err != nil {
		return Sysroot{}, fmt.Errorf("sysroot: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", f, tmp).CombinedOutput(); err != nil {
			return Sysroot{}, fmt.Errorf("unpack %s with dpkg-deb (Debian's dpkg package): %w\n%s", f, err, out)
		}
	}
	if err := relativeLinks(tmp); err != nil {
		return Sysroot{}, err
	}
	if err := os.Rename(tmp, root.Dir); err != nil {
		if _, statErr := os.Stat(root.Dir); statErr == nil {
			return root, nil // another build unpacked it first
		}
		return Sysroot{}, fmt.Errorf("sysroot: %w", err)
	}
	fmt.Fprintf(log, "sysroot: glibc %s in %s\n", root.GLIBC, root.Dir)
	return root, nil
}

// fetchDeb returns the cached file of d (dir/<sha256>.deb), downloading it
// first if it is missing or does not match its SHA256.
func fetchDeb(ctx context.Context, d deb, dir, mirror string, log io.Writer) (string, error) {
	dst := filepath.Join(dir, d.SHA256+".deb")
	if err := checkFile(dst, d); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("deb cache: %w", err)
	}
	url := d.URL(mirror)
	fmt.Fprintf(log, "download %s\n", url)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("download %s %s (debian.lock says what to do when the file moved): %w", d.Package, d.Version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s (debian.lock says what to do when the file moved)", url, resp.Status)
	}
	tmp, err := os.CreateTemp(dir, ".download-")
	if err != nil {
		return "", fmt.Errorf("deb cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, io.LimitReader(resp.Body, d.Size+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("download %s: %w", url, err)
	}
	if err := checkFile(tmp.Name(), d); err != nil {
		return "", fmt.Errorf("download %s: %w", url, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("deb cache: %w", err)
	}
	return dst, nil
}

// checkFile checks a downloaded package's size and SHA256 against the lock.
func checkFile(name string, d deb) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.SHA256 {
		return fmt.Errorf("%s %s: %d bytes with SHA256 %s, debian.lock wants %d bytes with %s",
			d.Package, d.Version, n, got, d.Size, d.SHA256)
	}
	return nil
}

// relativeLinks rewrites every absolute symbolic link under root (the
// packages' /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/ld-2.31.so,
// /usr/lib/x86_64-linux-gnu/libdl.so -> /lib/...) as a relative one, so that
// it resolves inside the sysroot and not on the host.
func relativeLinks(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil || !path.IsAbs(target) {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		newTarget, err := filepath.Rel(path.Dir("/"+filepath.ToSlash(rel)), target)
		if err != nil {
			return fmt.Errorf("sysroot link %s -> %s: %w", rel, target, err)
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("sysroot link %s: %w", rel, err)
		}
		if err := os.Symlink(newTarget, p); err != nil {
			return fmt.Errorf("sysroot link %s: %w", rel, err)
		}
		return nil
	})
}
