package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// archiveFormat changes whenever the way an assembled image becomes an
// archive changes (compression, manifest or index.json content, the
// archive's tar layout): a stamp of another format never matches.
const archiveFormat = 1

// stamp is kept in the build's work directory (<OutDir>/.work/<name>.stamp)
// and says what the archive holds: the key of the image it was written from and the archive's own
// SHA256, so that an archive edited or truncated since is not reused.
type stamp struct {
	Key     string `json:"key"`
	Archive string `json:"archiveSHA256"`
	Digest  string `json:"digest"`
}

// key identifies an assembled image's archive: the layers' content (their
// uncompressed digests), the configuration, creation time and history, the
// reference, and what turns them into bytes (the archive format, the Go
// toolchain's gzip, go-containerregistry's manifest and layout writers).
// Two images with the same key have the same archive.
func (a *assembled) key(ref string) (string, error) {
	diffIDs := make([]string, len(a.layers))
	for i, l := range a.layers {
		diffIDs[i] = l.diffID.String()
	}
	b, err := json.Marshal(struct {
		Format   int
		Go, GGCR string
		Ref      string
		Created  time.Time
		Config   v1.Config
		DiffIDs  []string
		Comments []string
	}{archiveFormat, runtime.Version(), ggcrVersion(), ref, a.created, a.config, diffIDs, a.comments})
	if err != nil {
		return "", fmt.Errorf("image key: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// reusable returns the manifest digest of the archive on disk when its
// stamp says it was written from an image with this key and the archive
// is unchanged since.
func reusable(archive, stampFile, key string) (string, bool) {
	data, err := os.ReadFile(stampFile)
	if err != nil {
		return "", false
	}
	var s stamp
	if json.Unmarshal(data, &s) != nil || s.Key != key {
		return "", false
	}
	if sum, err := fileSHA256(archive); err != nil || sum != s.Archive {
		return "", false
	}
	return s.Digest, true
}

// writeStamp records that archive holds the image of key.
func writeStamp(archive, stampFile, key, digest string) error {
	sum, err := fileSHA256(archive)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(stamp{Key: key, Archive: sum, Digest: digest}, "", "  ")
	if err != nil {
		return err
	}
	tmp := stampFile + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, stampFile)
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ggcrVersion is the go-containerregistry module this program was built
// with ("unknown" when the binary carries no module information).
func ggcrVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/google/go-containerregistry" {
				return m.Version
			}
		}
	}
	return "unknown"
}
