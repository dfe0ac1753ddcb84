package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symbolic link of a layer. Owners are
// numeric only: a layer carries no user or group names.
type entry struct {
	// Path is absolute in the image ("/etc/passwd").
	Path string
	// Mode holds the permission bits, with fs.ModeSticky, ModeSetuid or
	// ModeSetgid where wanted; the type comes from the fields below.
	Mode     fs.FileMode
	UID, GID int
	Dir      bool
	// Link is a symbolic link's target.
	Link string
	// Src names the host file holding a regular file's content, or Data
	// holds it.
	Src  string
	Data []byte
}

// dir, file, link and text build entries owned by root.
func dir(p string, mode fs.FileMode) entry { return entry{Path: p, Mode: mode, Dir: true} }
func file(p, src string, mode fs.FileMode) entry {
	return entry{Path: p, Src: src, Mode: mode}
}
func link(p, target string) entry { return entry{Path: p, Link: target, Mode: 0o777} }
func text(p, content string) entry {
	return entry{Path: p, Data: []byte(content), Mode: 0o644}
}

// layerSpec is one layer's entries and the history line that says what it
// is.
type layerSpec struct {
	Comment string
	Entries []entry
}

// tarLayer writes the entries as an uncompressed tar: every missing parent
// directory added (0755, root), sorted by path, every time set to mtime, no
// user or group names, no device numbers. The same entries always give the
// same bytes.
func tarLayer(entries []entry, mtime time.Time) ([]byte, error) {
	byPath := map[string]entry{}
	for _, e := range entries {
		p := path.Clean(e.Path)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("layer entry %q: want an absolute path below /", e.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("layer entry %s: listed twice", p)
		}
		e.Path = p
		byPath[p] = e
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = dir(d, 0o755)
			} else if !byPath[d].Dir {
				return nil, fmt.Errorf("layer entry %s: its parent %s is not a directory", p, d)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		if err := writeEntry(tw, byPath[p], mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer tar: %w", err)
	}
	return buf.Bytes(), nil
}

// writeEntry writes one tar header and, for a regular file, its content.
func writeEntry(tw *tar.Writer, e entry, mtime time.Time) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    tarMode(e.Mode),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: mtime,
		// PAX, so that a long path stays one entry; Go adds PAX records
		// only when a field needs them.
		Format: tar.FormatPAX,
	}
	var content []byte
	switch {
	case e.Dir:
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case e.Link != "":
		h.Typeflag = tar.TypeSymlink
		h.Linkname = e.Link
	default:
		h.Typeflag = tar.TypeReg
		content = e.Data
		if e.Src != "" {
			b, err := os.ReadFile(e.Src)
			if err != nil {
				return fmt.Errorf("layer entry %s: %w", e.Path, err)
			}
			content = b
		}
		h.Size = int64(len(content))
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("layer entry %s: %w", e.Path, err)
	}
	if _, err := tw.Write(content); err != nil {
		return fmt.Errorf("layer entry %s: %w", e.Path, err)
	}
	return nil
}

// tarMode turns permission bits and the special bits into the tar mode
// word (c_ISUID 04000, c_ISGID 02000, c_ISVTX 01000).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// gzipLevel is the layers' compression: the standard library's default,
// a fair trade between size and time on a small machine. The compressed
// bytes depend on the Go toolchain's compress/flate; the archive stamp
// records the toolchain (stamp.go).
const gzipLevel = gzip.DefaultCompression

// memLayer is a layer held in memory: the uncompressed tar, gzipped on
// first use. go-containerregistry's tarball layers are not used because an
// environment variable (GGCR_EXPERIMENT_ESTARGZ) can change their bytes.
type memLayer struct {
	tar    []byte
	diffID v1.Hash

	once       sync.Once
	compressed []byte
	digest     v1.Hash
	err        error
}

var _ v1.Layer = (*memLayer)(nil)

// newMemLayer wraps an uncompressed layer tar.
func newMemLayer(tarBytes []byte) *memLayer {
	return &memLayer{tar: tarBytes, diffID: sha256Hash(tarBytes)}
}

func (l *memLayer) compress() error {
	l.once.Do(func() {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzipLevel)
		if err != nil {
			l.err = err
			return
		}
		// The gzip header stays bare: no name, no time, no OS byte of the
		// builder's choosing (Go writes 255, unknown, always).
		if _, err := zw.Write(l.tar); err != nil {
			l.err = err
			return
		}
		if err := zw.Close(); err != nil {
			l.err = err
			return
		}
		l.compressed = buf.Bytes()
		l.digest = sha256Hash(l.compressed)
	})
	return l.err
}

// Digest is the digest of the compressed layer.
func (l *memLayer) Digest() (v1.Hash, error) {
	if err := l.compress(); err != nil {
		return v1.Hash{}, err
	}
	return l.digest, nil
}

// DiffID is the digest of the uncompressed tar.
func (l *memLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Compressed returns the gzipped tar.
func (l *memLayer) Compressed() (io.ReadCloser, error) {
	if err := l.compress(); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(l.compressed)), nil
}

// Uncompressed returns the tar.
func (l *memLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}

// Size is the compressed size.
func (l *memLayer) Size() (int64, error) {
	if err := l.compress(); err != nil {
		return 0, err
	}
	return int64(len(l.compressed)), nil
}

// MediaType is the OCI gzip layer type.
func (l *memLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }

// sha256Hash is the v1.Hash of b.
func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}
