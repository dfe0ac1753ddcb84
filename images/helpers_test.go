package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// moduleRoot is the checkout the tests build from.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// testSysroot prepares the sysroot of debian.lock in the user's cache
// directory, as Build does. It needs deb.debian.org (or the packages in the
// cache), dpkg-deb and gcc: without them the test fails, it does not skip.
func testSysroot(t *testing.T) Sysroot {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := PrepareSysroot(ctx, filepath.Join(cache, "vshare"), "", io.Discard)
	if err != nil {
		t.Fatalf("the glibc %s sysroot (needs deb.debian.org, or the packages already in the cache): %v", GLIBCFloor, err)
	}
	return s
}

// imageFile is one entry of an image's layers.
type imageFile struct {
	Header  *tar.Header
	Content []byte
	Layer   int
}

// readImage returns an archive's image configuration, its index.json
// annotations, and its files by path (upper layers over lower), checking
// on the way that every layer is in canonical form: sorted entries, one
// mtime, numeric owners only.
func readImage(t *testing.T, archive string, mtime time.Time) (*v1.ConfigFile, map[string]string, map[string]imageFile) {
	t.Helper()
	img, ann, cleanup, err := OpenArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]imageFile{}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		prev := ""
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s layer %d: %v", archive, i, err)
			}
			name := strings.TrimSuffix(h.Name, "/")
			if name <= prev {
				t.Errorf("%s layer %d: %s after %s, want entries sorted by path", archive, i, name, prev)
			}
			prev = name
			if !h.ModTime.Equal(mtime) || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s layer %d: %s has mtime %v, owner names %q/%q; want %v and none",
					archive, i, h.Name, h.ModTime, h.Uname, h.Gname, mtime)
			}
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				t.Fatal(err)
			}
			p := "/" + filepath.Clean(h.Name)
			files[p] = imageFile{Header: h, Content: buf.Bytes(), Layer: i}
		}
		rc.Close()
	}
	return cf, ann, files
}
