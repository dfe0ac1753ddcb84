package images

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageSpec is what an image is made of: its layers, bottom first, and
// the runtime configuration.
type imageSpec struct {
	Layers []layerSpec
	Config v1.Config
}

// platform is the one platform the images are built for.
func platform() v1.Platform { return v1.Platform{OS: "linux", Architecture: "amd64"} }

// defaultPath is the PATH of every image (distroless' and Debian's).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// assembled is an image whose layers are written (uncompressed) but not yet
// compressed: enough to know its content (the layers' diff IDs) and to
// decide whether the archive on disk is still this image.
type assembled struct {
	layers   []*memLayer
	comments []string
	config   v1.Config
	created  time.Time
}

// assemble writes the spec's layers as tars and checks that the programs
// in them find their interpreter and libraries in the image.
func assemble(spec imageSpec, created time.Time) (*assembled, error) {
	all := map[string]entry{}
	a := &assembled{config: spec.Config, created: created}
	for _, ls := range spec.Layers {
		b, err := tarLayer(ls.Entries, created)
		if err != nil {
			return nil, fmt.Errorf("layer %q: %w", ls.Comment, err)
		}
		a.layers = append(a.layers, newMemLayer(b))
		a.comments = append(a.comments, ls.Comment)
		for _, e := range ls.Entries {
			all[e.Path] = e // an upper layer's entry shadows a lower one's
		}
	}
	if err := checkLinked(all); err != nil {
		return nil, err
	}
	return a, nil
}

// image is the OCI image (OCI manifest and config media types, OCI gzip
// layers, as ko builds them), compressing the layers on first use.
func (a *assembled) image() (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: a.created}
	adds := make([]mutate.Addendum, len(a.layers))
	for i, l := range a.layers {
		adds[i] = mutate.Addendum{
			Layer:     l,
			MediaType: types.OCILayer,
			History:   v1.History{Created: created, CreatedBy: a.comments[i], Comment: "vshare-images"},
		}
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = platform().OS, platform().Architecture
	cf.Created = created
	cf.Config = a.config
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}
