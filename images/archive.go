package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations of the manifest in an archive's index.json: the OCI image
// layout's tag, and the full reference containerd's importer names the
// image by (`ctr images import` in containerd 1.6 reads it).
const (
	AnnotationRefName       = "org.opencontainers.image.ref.name"
	AnnotationContainerdRef = "io.containerd.image.name"
)

// writeArchive writes img as an OCI image layout tarball at dst (through a
// temporary file and a rename): oci-layout, index.json with the one
// manifest annotated with ref, and the blobs, sorted, with fixed times and
// owners. It returns the manifest digest.
func writeArchive(dst string, img v1.Image, ref name.Tag, mtime time.Time) (v1.Hash, error) {
	dir, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".layout-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("archive %s: %w", dst, err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("archive %s: %w", dst, err)
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{
			AnnotationRefName:       ref.TagStr(),
			AnnotationContainerdRef: ref.Name(),
		}),
		layout.WithPlatform(platform()))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("archive %s: %w", dst, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("archive %s: %w", dst, err)
	}
	if err := tarDir(dir, dst, mtime); err != nil {
		return v1.Hash{}, fmt.Errorf("archive %s: %w", dst, err)
	}
	return digest, nil
}

// tarDir writes the regular files and directories under dir into a tar at
// dst, sorted, 0644 and 0755, owned by root, every time mtime; the file
// appears by rename once synced.
func tarDir(dir, dst string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, p := range paths {
		if err := addFile(tw, dir, p, mtime); err != nil {
			tmp.Close()
			return err
		}
	}
	err = tw.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// addFile writes one file or directory of the layout into the tar.
func addFile(tw *tar.Writer, dir, p string, mtime time.Time) error {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if fi.IsDir() {
		h.Name += "/"
		h.Mode = 0o755
		h.Typeflag = tar.TypeDir
		return tw.WriteHeader(h)
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// layoutName is what an OCI layout tarball may hold.
var layoutName = regexp.MustCompile(`^(oci-layout|index\.json|blobs/|blobs/sha256/|blobs/sha256/[0-9a-f]{64})$`)

// OpenArchive reads an OCI image layout tarball holding one image (as
// Build writes them) into a temporary directory and returns the image, its
// index.json annotations and a function that removes the directory (call it
// once done with the image).
func OpenArchive(archive string) (v1.Image, map[string]string, func(), error) {
	dir, err := os.MkdirTemp("", "vshare-archive-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open archive %s: %w", archive, err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	img, ann, err := openArchive(archive, dir)
	if err != nil {
		cleanup()
		return nil, nil, nil, fmt.Errorf("open archive %s: %w", archive, err)
	}
	return img, ann, cleanup, nil
}

func openArchive(archive, dir string) (v1.Image, map[string]string, error) {
	if err := untar(archive, dir); err != nil {
		return nil, nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, nil, fmt.Errorf("index.json lists %d manifests, want one image", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return nil, nil, err
	}
	return img, im.Manifests[0].Annotations, nil
}

// untar extracts the layout's files, refusing any other name (no links, no
// paths outside dir).
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !layoutName.MatchString(h.Name) {
			return fmt.Errorf("unexpected entry %q: not part of an OCI image layout", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = writeFrom(dst, tr)
		default:
			err = fmt.Errorf("entry %q: type %c, want a file or directory", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeFrom(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
