package install

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// TestFileReplacesAtomically: the new content lands under the target name,
// 0644, with no temporary file left; a reader holding the old file open (a
// container that preloaded it) still reads the old content.
func TestFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "image", "libvgpu.so")
	if err := os.Mkdir(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, src, "new library", 0o600)
	host := filepath.Join(dir, "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(host, "libvgpu.so")
	writeFile(t, dst, "old library", 0o755)
	old, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	if err := File(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != "new library" {
		t.Errorf("%s holds %q (%v), want the new library", dst, got, err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s mode %v (%v), want 0644", dst, fi.Mode(), err)
	}
	if kept, err := io.ReadAll(old); err != nil || string(kept) != "old library" {
		t.Errorf("the open old file reads %q (%v), want the old library", kept, err)
	}
	entries, err := os.ReadDir(host)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"libvgpu.so"}, names); diff != "" {
		t.Errorf("host directory (-want +got):\n%s", diff)
	}
}

// TestFileErrorsNameThePath: each failure names the path it is about and
// leaves nothing behind.
func TestFileErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "libvgpu.so")
	writeFile(t, src, "library", 0o644)
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{name: "missing source", from: filepath.Join(dir, "absent.so"), to: filepath.Join(dir, "out.so"), want: filepath.Join(dir, "absent.so")},
		{name: "source is a directory", from: dir, to: filepath.Join(dir, "out.so"), want: "not a regular file"},
		{name: "missing target directory", from: src, to: filepath.Join(dir, "nope", "libvgpu.so"), want: filepath.Join(dir, "nope")},
		{name: "target is a directory", from: src, to: dir, want: "over " + dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadDir(dir)
			err := File(tc.from, tc.to)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("File(%s, %s) = %v, want an error naming %q", tc.from, tc.to, err, tc.want)
			}
			after, _ := os.ReadDir(dir)
			if len(after) != len(before) {
				t.Errorf("%d entries in %s after the failure, %d before", len(after), dir, len(before))
			}
		})
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    Args
		wantErr string
	}{
		{name: "chart's", args: []string{"--from=/usr/local/vshare/lib/libvgpu.so", "--to=/usr/local/vgpu/libvgpu.so"},
			want: Args{From: DefaultSource, To: "/usr/local/vgpu/libvgpu.so"}},
		{name: "default source", args: []string{"--to", "/x/libvgpu.so"}, want: Args{From: DefaultSource, To: "/x/libvgpu.so"}},
		{name: "no target", args: nil, wantErr: `--to=""`},
		{name: "relative target", args: []string{"--to=libvgpu.so"}, wantErr: `--to="libvgpu.so"`},
		{name: "directory target", args: []string{"--to=/usr/local/vgpu/"}, wantErr: `--to="/usr/local/vgpu/"`},
		{name: "relative source", args: []string{"--from=a.so", "--to=/x/a.so"}, wantErr: `--from="a.so"`},
		{name: "unknown flag", args: []string{"--too=/x/a.so"}, wantErr: "unknown flag: --too"},
		{name: "extra argument", args: []string{"--to=/x/a.so", "now"}, wantErr: `unexpected arguments ["now"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseArgs(%q) = %v, want a usage error naming %s", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
