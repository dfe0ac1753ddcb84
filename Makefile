# Build, test and benchmark the GPU/NPU sharing stack for Volcano.
#
#   make test    lint, Go unit and session-level tests (race detector on),
#                libvgpu's C suite (plain, ASan/UBSan, valgrind), smoke test,
#                and the end-to-end suite
#   make build   binaries into bin/
#   make bench   in-process benchmarks, ours against Volcano's built-in
#   make e2e     end-to-end tests on a local control plane (e2e/README.md)
#   make demo    the local end-to-end demo: 3 simulated DGX A100 nodes,
#                sample Volcano Jobs sharing GPUs, a table of who holds what
#                (DEMO_FLAGS=--keep leaves the cluster up until Ctrl-C)

GO            ?= go
BIN           := $(CURDIR)/bin
TOOLS         := $(CURDIR)/.cache/tools
STATICCHECK   := $(TOOLS)/staticcheck
STATICCHECK_VERSION := v0.8.2
BENCHSTAT     := $(TOOLS)/benchstat
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
BENCH_COUNT   ?= 6
BENCH_TIME    ?= 1x
PKGS          := ./...

.PHONY: all build libvgpu test unit libvgpu-test lint vet staticcheck smoke bench e2e demo clean

all: build test

build: libvgpu
	$(GO) build -o $(BIN)/vc-scheduler ./cmd/vc-scheduler
	$(GO) build -o $(BIN)/vgpu-device-plugin ./cmd/vgpu-device-plugin

libvgpu:
	$(MAKE) -C libvgpu all

test: lint unit libvgpu-test smoke e2e

libvgpu-test:
	$(MAKE) -C libvgpu test

# The scheduler binary starts and lists Volcano's flags next to ours.
smoke: build
	@$(BIN)/vc-scheduler --help >$(BIN)/help.txt 2>&1 || true
	@for flag in --scheduler-conf --leader-elect --listen-address --enable-healthz --enable-metrics --schedule-period --kubeconfig -v; do \
		grep -q -- "$$flag" $(BIN)/help.txt || { echo "vc-scheduler --help does not list $$flag" >&2; cat $(BIN)/help.txt >&2; exit 1; }; \
	done
	@echo "smoke: vc-scheduler --help lists Volcano's flags"

unit:
	$(GO) test -race -count=1 $(PKGS)

lint: vet staticcheck

# The e2e harness is behind a build tag; vet it too (it compiles in seconds).
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/...

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(PKGS)

$(BENCHSTAT):
	GOBIN=$(TOOLS) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)

# Benchmarks run ours and Volcano's built-in side by side in one process;
# hack/bench.sh prints benchstat's comparison and the pods/s ratio.
bench: $(BENCHSTAT)
	BENCHSTAT=$(BENCHSTAT) BENCH_COUNT=$(BENCH_COUNT) ./hack/bench.sh

# The e2e harness builds etcd, kube-apiserver, vc-controller-manager and kwok
# once per machine into $XDG_CACHE_HOME (or ~/.cache)/vshare-e2e/<go.sum hash>
# (about 10 minutes cold on 2 cores, more with module downloads), and this
# project's binaries on every run.
E2E_FLAGS ?=
DEMO_FLAGS ?=

e2e:
	$(GO) test -tags e2e ./e2e/... -v -timeout 60m -count=1 $(E2E_FLAGS)

demo:
	$(GO) run -tags e2e ./e2e/cmd/demo $(DEMO_FLAGS)

clean:
	rm -rf $(BIN)
	$(MAKE) -C libvgpu clean
