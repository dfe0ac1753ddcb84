# Build, test and benchmark the GPU/NPU sharing stack for Volcano.
#
#   make test    lint, Go unit and session-level tests (race detector on),
#                libvgpu's C suite (plain, ASan/UBSan, valgrind), smoke test
#   make build   binaries into bin/
#   make bench   in-process benchmarks, ours against Volcano's built-in
#   make demo    the local end-to-end demo (arrives with the e2e harness)

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

.PHONY: all build libvgpu test unit libvgpu-test lint vet staticcheck smoke bench demo clean

all: build test

build: libvgpu
	$(GO) build -o $(BIN)/vc-scheduler ./cmd/vc-scheduler
	$(GO) build -o $(BIN)/vgpu-device-plugin ./cmd/vgpu-device-plugin

libvgpu:
	$(MAKE) -C libvgpu all

test: lint unit libvgpu-test smoke

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

vet:
	$(GO) vet $(PKGS)

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

demo:
	@echo "make demo arrives with the end-to-end harness (issue: End to end, e2e/)." >&2
	@echo "Until then: make test runs the session-level scenarios on Volcano's real actions." >&2
	@exit 2

clean:
	rm -rf $(BIN)
	$(MAKE) -C libvgpu clean
