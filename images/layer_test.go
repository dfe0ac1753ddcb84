package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTarLayerIsCanonical: the same entries in any order give the same
// bytes; missing parents are added as 0755 root directories; entries come
// sorted, with one mtime, numeric owners and no names; the sticky bit and
// symbolic links survive.
func TestTarLayerIsCanonical(t *testing.T) {
	mtime := time.Unix(1700000000, 0).UTC()
	entries := []entry{
		text("/etc/passwd", "root:x:0:0::/:/sbin/nologin\n"),
		dir("/tmp", 0o777|os.ModeSticky),
		link("/lib64/ld.so", "../lib/ld.so"),
		{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		text("/a-b", "x"),
		dir("/a", 0o755),
	}
	first, err := tarLayer(entries, mtime)
	if err != nil {
		t.Fatal(err)
	}
	reversed := make([]entry, len(entries))
	for i, e := range entries {
		reversed[len(entries)-1-i] = e
	}
	second, err := tarLayer(reversed, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("the same entries in another order gave other bytes")
	}

	type row struct {
		Name     string
		Type     byte
		Mode     int64
		UID, GID int
		Link     string
	}
	var got []row
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(mtime) || h.Uname != "" || h.Gname != "" || h.Devmajor != 0 {
			t.Errorf("%s: mtime %v, names %q/%q, devmajor %d", h.Name, h.ModTime, h.Uname, h.Gname, h.Devmajor)
		}
		got = append(got, row{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname})
	}
	want := []row{
		{"a/", tar.TypeDir, 0o755, 0, 0, ""},
		{"a-b", tar.TypeReg, 0o644, 0, 0, ""},
		{"etc/", tar.TypeDir, 0o755, 0, 0, ""},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, ""},
		{"home/", tar.TypeDir, 0o755, 0, 0, ""},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, ""},
		{"lib64/", tar.TypeDir, 0o755, 0, 0, ""},
		{"lib64/ld.so", tar.TypeSymlink, 0o777, 0, 0, "../lib/ld.so"},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestTarLayerRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{name: "relative path", entries: []entry{text("etc/passwd", "")}, want: `"etc/passwd": want an absolute path`},
		{name: "root", entries: []entry{dir("/", 0o755)}, want: `"/": want an absolute path below /`},
		{name: "twice", entries: []entry{text("/a", ""), text("/a", "")}, want: "/a: listed twice"},
		{name: "file as parent", entries: []entry{text("/a", ""), text("/a/b", "")}, want: "/a/b: its parent /a is not a directory"},
		{name: "missing source", entries: []entry{file("/a", "/nonexistent/file", 0o644)}, want: "/nonexistent/file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tarLayer(tc.entries, time.Unix(0, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("tarLayer = %v, want an error containing %s", err, tc.want)
			}
		})
	}
}
