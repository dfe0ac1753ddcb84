package quality

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// vendoredDir is the committed copy of the openb files (see its README.md).
var vendoredDir = filepath.Join("..", "testdata", "openb")

// TestVendoredTrace checks the committed openb files against SHA256SUMS,
// the hashes of the plain CSV files as upstream publishes them: every
// listed file is there as NAME.gz, every .gz file is listed, and each one
// decompresses to exactly the listed bytes, so a corrupted, truncated,
// swapped or missing file fails. It also checks that the files were
// written with `gzip -n` (no name or time stamp in the header), as fetch.sh
// does, so regenerating them does not change them.
func TestVendoredTrace(t *testing.T) {
	want := readSums(t, filepath.Join(vendoredDir, "SHA256SUMS"))
	if len(want) != 25 {
		t.Errorf("SHA256SUMS lists %d files, want 25 (the GPU node list and the 24 pod lists)", len(want))
	}
	gz, err := filepath.Glob(filepath.Join(vendoredDir, "*.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var listed, present []string
	for name := range want {
		listed = append(listed, name+".gz")
	}
	for _, p := range gz {
		present = append(present, filepath.Base(p))
	}
	sort.Strings(listed)
	sort.Strings(present)
	if diff := cmp.Diff(listed, present); diff != "" {
		t.Errorf(".gz files in %s against SHA256SUMS (-listed +present):\n%s", vendoredDir, diff)
	}
	for name, sum := range want {
		t.Run(name, func(t *testing.T) {
			got, hdr, err := gunzipSHA256(filepath.Join(vendoredDir, name+".gz"))
			if err != nil {
				t.Fatal(err)
			}
			if got != sum {
				t.Errorf("%s.gz decompresses to sha256 %s, want %s (SHA256SUMS); regenerate with fetch.sh", name, got, sum)
			}
			if hdr.Name != "" || !hdr.ModTime.IsZero() {
				t.Errorf("%s.gz header has name %q, time %v; want neither (gzip -n, as fetch.sh writes it)", name, hdr.Name, hdr.ModTime)
			}
		})
	}
}

// readSums parses a sha256sum file into file name -> hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open checksums: %v", err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || len(fields[0]) != 64 {
			t.Fatalf("%s:%d: %q, want \"<sha256 hex>  <file>\"", path, line, sc.Text())
		}
		sums[strings.TrimPrefix(fields[1], "*")] = fields[0]
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return sums
}

// gunzipSHA256 returns the SHA-256 of a gzip file's decompressed contents
// and its gzip header.
func gunzipSHA256(path string) (string, gzip.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", gzip.Header{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", gzip.Header{}, fmt.Errorf("gunzip %s: %w", path, err)
	}
	defer zr.Close()
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil {
		return "", zr.Header, fmt.Errorf("gunzip %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), zr.Header, nil
}
