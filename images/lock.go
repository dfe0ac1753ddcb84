package images

import (
	"bufio"
	_ "embed" // debian.lock
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// debianLock is the list of pinned Debian packages (debian.lock): the
// recipe's, compiled in with the rest of it.
//
//go:embed debian.lock
var debianLock string

// deb is one pinned Debian package.
type deb struct {
	Package, Version string
	// Archive is the archive under the mirror ("debian", "debian-security").
	Archive string
	// Path is the file's path in the archive (its Filename in Packages).
	Path   string
	SHA256 string
	Size   int64
}

// URL is where the package is downloaded from.
func (d deb) URL(mirror string) string {
	return strings.TrimSuffix(mirror, "/") + "/" + d.Archive + "/" + d.Path
}

// lock is a parsed debian.lock.
type lock struct {
	Mirror string
	Debs   []deb
}

// find returns the pinned package named pkg.
func (l lock) find(pkg string) (deb, bool) {
	for _, d := range l.Debs {
		if d.Package == pkg {
			return d, true
		}
	}
	return deb{}, false
}

var (
	sha256Hex   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	archiveName = regexp.MustCompile(`^[a-z0-9.-]+(/[A-Za-z0-9.-]+)*$`)
)

// parseLock reads a lock file (see debian.lock for the format); errors name
// the line, the field, its value and what is allowed.
func parseLock(text string) (lock, error) {
	var l lock
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		bad := func(field, value, allowed string) error {
			return fmt.Errorf("debian.lock line %d: %s %q: %s", n, field, value, allowed)
		}
		switch {
		case f[0] == "mirror" && len(f) == 2:
			if !strings.HasPrefix(f[1], "http://") && !strings.HasPrefix(f[1], "https://") {
				return lock{}, bad("mirror", f[1], "want an http:// or https:// URL")
			}
			l.Mirror = f[1]
		case f[0] == "deb" && len(f) == 7:
			d := deb{Package: f[1], Version: f[2], Archive: f[3], Path: f[4], SHA256: f[5]}
			if !archiveName.MatchString(d.Archive) {
				return lock{}, bad("archive", d.Archive, "want a path like debian or debian-security")
			}
			// The file name is <package>_<version without epoch>_amd64.deb:
			// a line whose path names another package or version is a
			// copy-paste slip.
			ver := d.Version
			if _, v, ok := strings.Cut(d.Version, ":"); ok {
				ver = v
			}
			if want := d.Package + "_" + ver + "_amd64.deb"; path.Base(d.Path) != want || path.Clean(d.Path) != d.Path || strings.HasPrefix(d.Path, "/") {
				return lock{}, bad("path", d.Path, "want a relative pool path ending in "+want)
			}
			if !sha256Hex.MatchString(d.SHA256) {
				return lock{}, bad("sha256", d.SHA256, "want 64 lower-case hex digits")
			}
			size, err := strconv.ParseInt(f[6], 10, 64)
			if err != nil || size <= 0 {
				return lock{}, bad("size", f[6], "want a positive number of bytes")
			}
			d.Size = size
			if _, dup := l.find(d.Package); dup {
				return lock{}, bad("package", d.Package, "listed twice")
			}
			l.Debs = append(l.Debs, d)
		default:
			return lock{}, fmt.Errorf("debian.lock line %d: %q: want `mirror <url>` or `deb <package> <version> <archive> <path> <sha256> <size>`", n, line)
		}
	}
	if l.Mirror == "" {
		return lock{}, fmt.Errorf("debian.lock: no mirror line")
	}
	if len(l.Debs) == 0 {
		return lock{}, fmt.Errorf("debian.lock: no packages")
	}
	return l, nil
}
