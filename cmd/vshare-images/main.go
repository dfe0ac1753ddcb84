// Command vshare-images builds vshare's container images as OCI image
// layout tarballs without a container engine, and pushes one to a registry
// (package images, docs/install.md "Images"):
//
//	vshare-images build --tag v1.2.3 [--registry ghcr.io/vgpushare] [--out bin/images] [--image vc-scheduler ...]
//	vshare-images push --archive bin/images/vc-scheduler.tar --to registry.example.com/vshare/vc-scheduler:v1.2.3
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/vgpushare/vshare/images"
)

const usage = `usage:
  vshare-images build --tag TAG [--registry R] [--out DIR] [--image NAME ...] [--root DIR]
  vshare-images push --archive FILE --to REGISTRY/REPOSITORY:TAG [--insecure]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "build":
		err = build(ctx, args[1:])
	case "push":
		err = push(ctx, args[1:])
	default:
		fmt.Fprintf(os.Stderr, "vshare-images: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vshare-images:", err)
		return 1
	}
	return 0
}

func build(ctx context.Context, args []string) error {
	o := images.Options{Log: os.Stderr}
	fs := pflag.NewFlagSet("vshare-images build", pflag.ExitOnError)
	fs.StringVar(&o.Root, "root", ".", "the module's checkout")
	fs.StringVar(&o.OutDir, "out", "", "directory of the archives (default <root>/bin/images)")
	fs.StringVar(&o.Registry, "registry", images.DefaultRegistry, "registry (and path) prefixing the image names")
	fs.StringVar(&o.Tag, "tag", "", "tag of every image")
	fs.StringSliceVar(&o.Names, "image", nil, fmt.Sprintf("images to build (default all: %v)", images.All()))
	fs.StringVar(&o.CacheDir, "cache-dir", "", "downloaded Debian packages and the sysroot (default $XDG_CACHE_HOME/vshare)")
	fs.StringVar(&o.DebianMirror, "debian-mirror", "", "replaces images/debian.lock's mirror (e.g. http://archive.debian.org)")
	fs.StringVar(&o.Go, "go", "go", "the go command")
	fs.StringVar(&o.CC, "cc", "gcc", "the C compiler (the sysroot comes through its options)")
	fs.BoolVar(&o.Rebuild, "rebuild", false, "write every archive, even one that holds the same image")
	_ = fs.Parse(args) // ExitOnError
	if fs.NArg() > 0 {
		return fmt.Errorf("build: unexpected arguments %q", fs.Args())
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec < 0 {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
		}
		o.Created = time.Unix(sec, 0)
	}
	res, err := images.Build(ctx, o)
	if err != nil {
		return err
	}
	names := o.Names
	if len(names) == 0 {
		names = images.All()
	}
	for _, n := range names {
		r := res[n]
		fmt.Printf("%s\t%s@%s\t%s\n", r.Name, r.Reference, r.Digest, r.Archive)
	}
	return nil
}

func push(ctx context.Context, args []string) error {
	var archive, to string
	var opts images.PushOptions
	fs := pflag.NewFlagSet("vshare-images push", pflag.ExitOnError)
	fs.StringVar(&archive, "archive", "", "an archive `vshare-images build` wrote")
	fs.StringVar(&to, "to", "", "destination, registry/repository:tag")
	fs.BoolVar(&opts.Insecure, "insecure", false, "allow plain HTTP to the registry")
	_ = fs.Parse(args) // ExitOnError
	if archive == "" || to == "" || fs.NArg() > 0 {
		return fmt.Errorf("push: want --archive FILE --to REGISTRY/REPOSITORY:TAG")
	}
	digest, err := images.Push(ctx, archive, to, opts)
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", to, digest)
	return nil
}
