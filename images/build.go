package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// builder is one Build call: the options and the sysroot, prepared on
// first use.
type builder struct {
	opts Options

	sysrootOnce sync.Once
	root        Sysroot
	rootErr     error
}

// sysroot prepares the sysroot once per Build.
func (b *builder) sysroot(ctx context.Context) (Sysroot, error) {
	b.sysrootOnce.Do(func() {
		b.root, b.rootErr = PrepareSysroot(ctx, b.opts.CacheDir, b.opts.DebianMirror, b.opts.Log)
	})
	return b.root, b.rootErr
}

// Build builds the images opts.Names into opts.OutDir/<name>.tar (OCI image
// layout tarballs, their index.json naming <registry>/<name>:<tag>) and
// returns them by name. Every input is built each time (the go command's
// cache and its up-to-date check make that cheap), but an archive whose
// image is the same as the one on disk (same layer contents, configuration
// and reference; stamp.go) is kept, not compressed and written again: a
// call with nothing changed took 4 s on the 2-core build machine, one that
// writes every archive 16 to 20 s, a first one with an empty Go build cache
// about 8 minutes (docs/install.md, "Images"). Build holds a lock on
// OutDir: concurrent calls on one directory take turns.
func Build(ctx context.Context, opts Options) (map[string]Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	work := filepath.Join(o.OutDir, ".work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	unlock, err := lockDir(work)
	if err != nil {
		return nil, err
	}
	defer unlock()

	b := &builder{opts: o}
	out := make(map[string]Result, len(o.Names))
	for _, name := range o.Names {
		start := time.Now()
		r, err := b.build(ctx, name, work)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		verb := "wrote"
		if r.Reused {
			verb = "kept"
		}
		fmt.Fprintf(o.Log, "%s %s %s %s (%s)\n", verb, r.Archive, r.Reference, r.Digest, time.Since(start).Round(100*time.Millisecond))
		out[name] = r
	}
	return out, nil
}

// build makes one image: its inputs, its layers, and its archive unless
// the one on disk holds the same image.
func (b *builder) build(ctx context.Context, name, work string) (Result, error) {
	ref, err := b.opts.reference(name)
	if err != nil {
		return Result{}, err
	}
	dir := filepath.Join(work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	spec, err := recipeFor(name)(ctx, b, dir)
	if err != nil {
		return Result{}, err
	}
	a, err := assemble(spec, b.opts.Created)
	if err != nil {
		return Result{}, err
	}
	key, err := a.key(ref.Name())
	if err != nil {
		return Result{}, err
	}
	res := Result{Name: name, Reference: ref.Name(), Archive: filepath.Join(b.opts.OutDir, name+".tar")}
	stampFile := filepath.Join(work, name+".stamp")
	if digest, ok := reusable(res.Archive, stampFile, key); ok && !b.opts.Rebuild {
		res.Digest, res.Reused = digest, true
		return res, nil
	}
	img, err := a.image()
	if err != nil {
		return Result{}, err
	}
	digest, err := writeArchive(res.Archive, img, ref, b.opts.Created)
	if err != nil {
		return Result{}, err
	}
	res.Digest = digest.String()
	if err := writeStamp(res.Archive, stampFile, key, res.Digest); err != nil {
		return Result{}, fmt.Errorf("stamp %s: %w", stampFile, err)
	}
	return res, nil
}

// lockDir takes an exclusive flock on dir/.lock, waiting for other builds.
func lockDir(dir string) (func(), error) {
	p := filepath.Join(dir, ".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("images: lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("images: lock %s: %w", p, err)
	}
	return func() { f.Close() }, nil
}
