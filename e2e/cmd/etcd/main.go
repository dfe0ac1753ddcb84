//go:build e2e

// Command etcd is a single-member etcd for the end-to-end harness: it listens
// on loopback only, keeps its data in --data-dir and skips fsync, which is
// fine for a throw-away test cluster and much faster on small machines.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	if err := run(*dataDir, *clientURL, *peerURL); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run(dataDir, clientURL, peerURL string) error {
	if dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("--listen-client-url=%q: %w", clientURL, err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("--listen-peer-url=%q: %w", peerURL, err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dataDir
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd not ready after 60s")
	}
	fmt.Fprintln(os.Stderr, "etcd: ready, serving", cu.String())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Fprintln(os.Stderr, "etcd: received", s)
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}
