package images

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// smallArchive writes a two-layer image of inline files as an archive
// named ref, and returns its path and manifest digest.
func smallArchive(t *testing.T, outDir, ref string) (string, v1.Hash) {
	t.Helper()
	spec := imageSpec{
		Layers: []layerSpec{
			{Comment: "base", Entries: []entry{text("/etc/passwd", "root:x:0:0::/:/sbin/nologin\n"), dir("/tmp", 0o777|os.ModeSticky)}},
			{Comment: "app", Entries: []entry{{Path: "/app", Data: []byte("#!/app\n"), Mode: 0o755}}},
		},
		Config: v1.Config{Entrypoint: []string{"/app"}, User: "65532:65532"},
	}
	a, err := assemble(spec, time.Unix(0, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	img, err := a.image()
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(outDir, "small.tar")
	digest, err := writeArchive(archive, img, tag, time.Unix(0, 0).UTC())
	if err != nil {
		t.Fatal(err)
	}
	return archive, digest
}

// TestArchiveIsAnOCILayoutNamedForContainerd: the archive is an OCI image
// layout (oci-layout, index.json, blobs; sorted, fixed times, root-owned)
// whose one manifest carries the tag and the full reference containerd's
// importer names the image by; it reads back as the same image.
func TestArchiveIsAnOCILayoutNamedForContainerd(t *testing.T) {
	dir := t.TempDir()
	archive, digest := smallArchive(t, dir, "registry.example.com/vshare/small:v1.2.3")

	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: owner %d:%d %q, mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		names = append(names, h.Name)
	}
	if len(names) < 6 || names[0] != "blobs/" || names[1] != "blobs/sha256/" ||
		names[len(names)-2] != "index.json" || names[len(names)-1] != "oci-layout" {
		t.Errorf("archive entries %q, want blobs/, blobs/sha256/, the blobs, index.json, oci-layout", names)
	}

	img, ann, cleanup, err := OpenArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	want := map[string]string{
		AnnotationRefName:       "v1.2.3",
		AnnotationContainerdRef: "registry.example.com/vshare/small:v1.2.3",
	}
	if diff := cmp.Diff(want, ann); diff != "" {
		t.Errorf("index.json annotations (-want +got):\n%s", diff)
	}
	if got, err := img.Digest(); err != nil || got != digest {
		t.Errorf("read back digest %v (%v), want %v", got, err, digest)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %v (%v), want OCI", mt, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.User != "65532:65532" || !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("config: %s/%s user %q created %v", cf.OS, cf.Architecture, cf.Config.User, cf.Created)
	}
}

// TestOpenArchiveRefusesForeignEntries: only the names of an OCI layout are
// extracted; a path that climbs out, or a link, is refused.
func TestOpenArchiveRefusesForeignEntries(t *testing.T) {
	for _, h := range []*tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg},
		{Name: "blobs/sha256/" + strings.Repeat("a", 64), Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		archive := filepath.Join(t.TempDir(), "bad.tar")
		f, err := os.Create(archive)
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		f.Close()
		if _, _, _, err := OpenArchive(archive); err == nil || !strings.Contains(err.Error(), archive) {
			t.Errorf("OpenArchive(entry %q type %c) = %v, want an error naming the archive", h.Name, h.Typeflag, err)
		}
	}
}

// TestPushToRegistry pushes an archive to go-containerregistry's
// in-process registry and pulls it back: same manifest digest, same
// config.
func TestPushToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	archive, digest := smallArchive(t, t.TempDir(), "ghcr.io/vgpushare/small:dev")

	to := host + "/vshare/small:v9"
	got, err := Push(context.Background(), archive, to, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != digest.String() {
		t.Errorf("Push returned %s, want the archive's %s", got, digest)
	}
	ref, err := name.NewTag(to)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := pulled.Digest(); err != nil || d != digest {
		t.Errorf("pulled digest %v (%v), want %v", d, err, digest)
	}
	cf, err := pulled.ConfigFile()
	if err != nil || cf.Config.Entrypoint[0] != "/app" {
		t.Errorf("pulled config %+v (%v)", cf, err)
	}

	if _, err := Push(context.Background(), archive, "not a reference", PushOptions{}); err == nil || !strings.Contains(err.Error(), `"not a reference"`) {
		t.Errorf("Push to a bad reference = %v, want an error naming it", err)
	}
}
