package images

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say how Push reaches the registry.
type PushOptions struct {
	// Keychain supplies credentials; nil means authn.DefaultKeychain
	// (docker's config.json and its credential helpers, as `docker login`
	// and `crane auth login` write them).
	Keychain authn.Keychain
	// Insecure allows plain HTTP (a registry on localhost or a private
	// address uses it anyway, as go-containerregistry decides).
	Insecure bool
}

// Push uploads the image of an archive Build wrote to the reference to
// (registry/repository:tag) with go-containerregistry's remote.Write, and
// returns the manifest digest, which is the archive's: the registry holds
// the same bytes.
func Push(ctx context.Context, archive, to string, opts PushOptions) (string, error) {
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.NewTag(to, nameOpts...)
	if err != nil {
		return "", fmt.Errorf("push: --to %q: want registry/repository:tag: %w", to, err)
	}
	img, _, cleanup, err := OpenArchive(archive)
	if err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	defer cleanup()
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
		return "", fmt.Errorf("push %s to %s: %w", archive, ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("push %s: %w", archive, err)
	}
	return digest.String(), nil
}
