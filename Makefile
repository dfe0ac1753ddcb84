# Build, test and benchmark the GPU/NPU sharing stack for Volcano.
#
#   make test    lint, the container images (their tests build them twice
#                more, relinking from the cache the first build filled),
#                Go unit and session-level tests (race detector on),
#                the placement-quality check (quality-check, no race
#                detector), libvgpu's C suite (plain, ASan/UBSan, valgrind),
#                smoke test, and the end-to-end suite
#   make build   binaries into bin/ (kubectl-vshare included; `make
#                kubectl-vshare` builds only the kubectl plugin)
#   make images  the container images as OCI archives in bin/images/, no
#                container engine needed (REGISTRY=, TAG=; docs/install.md)
#   make bench   in-process benchmarks against baselines in the same run (a
#                no-op plugin, Volcano's built-in, throttled against a real
#                kube-apiserver, upstream's agent), raw output in bench/results/
#   make e2e     end-to-end tests on a local control plane (e2e/README.md),
#                then on a real node (make e2e-real-node: the kubelet with
#                containerd and the chart from the images; needs root),
#                a short fault campaign included
#   make faults  the long fault campaign (docs/reliability.md): FAULT_SEEDS
#                seeds of FAULT_DURATION each (default 1-10 x 4m, about 45 min),
#                and the node side's container churn for FAULT_DURATION
#   make gpu-check  on a node with an NVIDIA GPU: libvgpu against the real
#                driver (docs/gpu-check.md); elsewhere "no NVIDIA GPU: skipped"
#   make demo    the local end-to-end demo: 3 simulated DGX A100 nodes,
#                sample Volcano Jobs sharing GPUs, a table of who holds what
#                (DEMO_FLAGS=--keep leaves the cluster up until Ctrl-C;
#                DEMO_FLAGS=--real-node adds a real node: kubelet, containerd,
#                the chart from images built here; root, docs/install.md)

GO            ?= go
BIN           := $(CURDIR)/bin
# The project's tools live in the user's cache, beside Go's build cache,
# named by version, so that a fresh clone (CI's) reuses them instead of
# compiling them again, and a version bump installs the new one.
TOOLS         := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/vshare/tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK   := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
BENCHSTAT_VERSION := v0.0.0-20260908200009-22c9c6c9d4da
BENCHSTAT     := $(TOOLS)/benchstat-$(BENCHSTAT_VERSION)
BENCH_COUNT   ?= 3
BENCH_TIME    ?= 1x
PKGS          := ./...

.PHONY: all build kubectl-vshare libvgpu test unit libvgpu-test lint vet staticcheck smoke bench bench-profile bench-e2e bench-e2e-slow-agent e2e e2e-suite e2e-real-node faults demo clean quality quality-extra quality-left quality-repro quality-check fuzz fuzz-changed gpu-check bench-compare bench-heap bench-floors test-cold bench-e2e-agent-profile bench-e2e-rules

all: build test

build: libvgpu kubectl-vshare
	$(GO) build -o $(BIN)/vc-scheduler ./cmd/vc-scheduler
	$(GO) build -o $(BIN)/vgpu-device-plugin ./cmd/vgpu-device-plugin

# The kubectl plugin: put bin/ on the PATH (or copy bin/kubectl-vshare
# there) and `kubectl vshare cards` works (docs/kubectl-vshare.md).
kubectl-vshare:
	$(GO) build -o $(BIN)/kubectl-vshare ./cmd/kubectl-vshare

libvgpu:
	$(MAKE) -C libvgpu all

# make test runs its stages one after the other and ends with each one's
# wall time (hack/stages.sh; also in bin/stage-times.txt).
TEST_STAGES := lint images unit quality-check libvgpu-test smoke e2e-suite e2e-real-node
test:
	@GO=$(GO) MAKE="$(MAKE)" hack/stages.sh $(TEST_STAGES)

# What CI runs must run: tests that need root (containers, a real node)
# fail instead of skipping under make test (internal/testroot).
test: export VSHARE_ROOT_REQUIRED := 1

libvgpu-test:
	$(MAKE) -C libvgpu test

gpu-check:
	@$(MAKE) -s -C libvgpu gpu-check

# The scheduler binary starts and lists Volcano's flags next to ours; the
# kubectl plugin answers --help.
smoke: build
	@$(BIN)/vc-scheduler --help >$(BIN)/help.txt 2>&1 || true
	@for flag in --scheduler-conf --leader-elect --listen-address --enable-healthz --enable-metrics --schedule-period --kubeconfig -v; do \
		grep -q -- "$$flag" $(BIN)/help.txt || { echo "vc-scheduler --help does not list $$flag" >&2; cat $(BIN)/help.txt >&2; exit 1; }; \
	done
	@echo "smoke: vc-scheduler --help lists Volcano's flags"
	@$(BIN)/kubectl-vshare --help | grep -q "kubectl vshare cards" || { echo "kubectl-vshare --help does not list its commands" >&2; exit 1; }
	@echo "smoke: kubectl-vshare --help lists its commands"

# Every Go fuzz target for FUZZTIME (default 10m) each; the corpus it grows
# lands in testdata/fuzz/ and is replayed by `make unit`.
fuzz:
	hack/fuzz.sh

# The fuzz targets of the packages a change touches (.go files changed since
# the merge base with BASE, default origin/main or main), FUZZTIME (default
# 1m) each, one at a time; stops at the first failure and names the target
# and the failing input Go wrote to testdata/fuzz/.
fuzz-changed:
	hack/fuzz-changed.sh

# The scheduler's test-only crash hook (deviceshare/bind) is compiled only with the vsharetest tag
# (as the e2e framework builds the scheduler); its own tests run with it.
# (TestReleaseSchedulerHasNoCrashHook, in the first run, checks the release build.)
unit:
	$(GO) test -race -count=1 $(PKGS)
	$(GO) test -race -count=1 -tags vsharetest -run 'CrashHook' ./deviceshare/bind/

lint: vet staticcheck

# The e2e harness is behind a build tag; vet it too (it compiles in seconds).
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/...
	$(GO) vet -tags vsharetest ./deviceshare/bind/

$(STATICCHECK):
	hack/install-tool.sh $(GO) honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $@

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(PKGS)

$(BENCHSTAT):
	hack/install-tool.sh $(GO) golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) $@

# Benchmarks run ours and the baselines side by side; hack/bench.sh writes
# the raw go test lines, benchstat's comparison and the summaries, each with
# the command, commit, date and machine, to bench/results/ (bench.txt,
# bench-*.txt, vgpu-alloc.csv, vgpu-api.csv; docs/benchmarks.md). The
# throttled built-in runs against a real kube-apiserver (e2e/cmd/benchapi,
# the e2e harness's cached binaries). BENCH_COUNT, BENCH_VGPU_COUNT,
# BENCH_SECTIONS etc.: see hack/bench.sh.
bench: $(BENCHSTAT)
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) BENCH_COUNT=$(BENCH_COUNT) ./hack/bench.sh

# The in-process vGPU benchmark at BASE and at the working tree, interleaved
# in one run (bench/results/bench-compare.txt): what a refactoring cost or
# gained, against a baseline measured beside it.
bench-compare: $(BENCHSTAT)
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) BASE=$(BASE) ./hack/bench-compare.sh

# Where ours' session time goes against the no-op floor: CPU profiles of
# one 10,000-pod run each, ours' top functions and ours minus noop
# (bench/results/vgpu-profile.txt). BENCH_PROFILE_BASE=floor profiles
# against the floor that rejects (vgpu-profile-floor.txt);
# BENCH_PROFILE_WORKLOAD=jobs uses the Volcano Jobs workload.
bench-profile:
	GO=$(GO) ./hack/bench-profile.sh

# What ours holds beyond the floor at its peak: heap profiles of one
# 10,000-pod session at 1000 nodes each, live objects after allocate and
# everything allocated, ours minus floor (bench/results/vgpu-heap.txt);
# with BASE, ours built at BASE too (before and after, one invocation).
bench-heap:
	GO=$(GO) BASE=$(BASE) ./hack/bench-heap.sh

# CI's run from nothing: .ci/run on a fresh clone of COMMIT (default HEAD)
# with every cache empty (Go's build and module caches, the e2e harness's
# built binaries, the project's tools); modules downloaded first and timed
# apart. Writes bench/results/make-test-cold.txt (OUT= to change it).
# CACHES=kept: the clone fresh, this user's caches as they are, as CI's
# clean clone on a runner that keeps ~/.cache
# (bench/results/make-test-fresh-clone.txt).
CACHES ?= empty
test-cold:
	GO=$(GO) CACHES=$(CACHES) ./hack/test-cold.sh $(COMMIT)

# Every device type against its own floor (vGPU, GPU share, HAMi Ascend,
# MindCluster; BenchmarkAllocateBackends), round by round in one run, with
# benchstat's ratios (bench/results/bench-floors.txt).
bench-floors: $(BENCHSTAT)
	GO=$(GO) BENCHSTAT=$(BENCHSTAT) ./hack/bench-floors.sh

# The placement-quality claims, checked on every `make test` (docs/quality.md,
# "Checked on every run") from the trace committed in bench/testdata/openb:
# TestAnchorsSeed42 (FGD and BestFit at seed 42 exactly as published) and
# TestFragmentBelowFGDSeed42 (fragment leaves less GPU unallocated than FGD at
# seed 42 on each of the five tuning traces), TestUpperBoundTuningTraces and
# TestOfflinePackingTuningTraces (at seed 42 on the five, every policy at or
# below the upper bound, the offline packing between fragment and the bound;
# "The limit"). Without the race detector: under
# -race `make unit` skips the full-trace runs, which take minutes there.
# VSHARE_QUALITY_REQUIRED=1 turns a skip (trace missing) into a failure, and
# the recipe fails if a test did not run (renamed, -run pattern stale).
# bench/results/quality-check.txt holds the output of a make test run, with
# its times.
# TestSimulatorPlacesAsVolcano (deviceshare) checks, arrival by arrival on
# 35-node samples of four traces, that Volcano's allocate action with our
# plugin places every pod where the simulator does ("One code path").
QUALITY_CHECK_TESTS := TestAnchorsSeed42 TestFragmentBelowFGDSeed42 TestUpperBoundTuningTraces TestOfflinePackingTuningTraces TestSimulatorPlacesAsVolcano
empty :=
space := $(empty) $(empty)

quality-check:
	@mkdir -p $(BIN)
	@echo "quality-check: $(QUALITY_CHECK_TESTS)"
	@VSHARE_QUALITY_REQUIRED=1 $(GO) test ./bench/quality/ ./deviceshare/ -count=1 -v -timeout 20m \
		-run '^($(subst $(space),|,$(QUALITY_CHECK_TESTS)))$$' >$(BIN)/quality-check.txt 2>&1; rc=$$?; \
		grep -v '^[IWE][0-9]\{4\} ' $(BIN)/quality-check.txt; \
		[ $$rc -eq 0 ] || exit $$rc; \
		for t in $(QUALITY_CHECK_TESTS); do \
			grep -q "^--- PASS: $$t " $(BIN)/quality-check.txt || { echo "quality-check: $$t did not run" >&2; exit 1; }; \
		done

# Placement quality on Alibaba's openb trace, the FGD methodology
# (docs/quality.md): every policy, all 24 pod lists, seeds 42-51, two jobs at
# once (hack/quality.sh), then the upper bound and the offline packing per
# trace; about 1.5 hours on two idle cores (docs/quality.md, "Running it").
# The trace comes from bench/testdata/openb
# (QUALITY_TRACE_DIR overrides it). Writes bench/results/quality.csv,
# quality-seeds.csv, quality.md, quality-traces.svg and one curve SVG per
# tuning trace. QUALITY_FLAGS are appended (e.g. --parallel 1, --traces tuning).
QUALITY_FLAGS ?=

quality:
	GO=$(GO) ./hack/quality.sh $(QUALITY_FLAGS)

# What docs/quality.md quotes beside the table ("One code path"): the
# ablation of scoring pods without vGPUs, its cost in Volcano's allocate
# action, and the shipped scheduler configuration against the plugin
# deciding alone. Writes bench/results/quality-extra.txt.
quality-extra:
	GO=$(GO) ./hack/quality-extra.sh

# Where the unplaced GPU is at 130% arrival, for fragment, FGD and the
# offline packing, on the five tuning traces at seed 42 (docs/quality.md,
# "The limit"). Writes bench/results/quality-left.txt.
quality-left:
	GO=$(GO) ./hack/quality-left.sh

# Reruns, in a fresh clone of HEAD, ours and the reference policies on all
# 24 traces and seeds 42-51, and Volcano's built-in on seed 42, and
# compares every row with bench/results/quality-seeds.csv without
# rewriting it (about 20 minutes). Writes bench/results/quality-repro.txt;
# fails on any difference.
quality-repro:
	GO=$(GO) ./hack/quality-repro.sh

# End-to-end scheduling burst on the local control plane: 200 simulated
# nodes (node agent + fake kubelet each), 100 Jobs x 20 pods, three runs on
# fresh clusters of the same shape: the floor (our scheduler, pods with no
# device request), ours (vGPU pods) and Volcano v1.10.0's stock scheduler
# (bounded by --stock-timeout, default 4m: it stalls). Request counts from
# the API server's audit log (docs/benchmarks.md). Writes
# bench/results/e2e-burst.csv and e2e-burst.txt (--out to change).
# THROUGHPUT_FLAGS=--schedulers=floor,ours etc.
THROUGHPUT_FLAGS ?=

bench-e2e:
	$(GO) run -tags e2e ./e2e/cmd/throughput $(THROUGHPUT_FLAGS)

# The slow-agent curve (docs/benchmarks.md): the floor once, then ours with
# our agent and ours on nodes of a stand-in for upstream's agent
# (ours-upstream), with every Allocate (or serve) delayed by 0, 100 ms,
# 500 ms and 2 s, on SLOW_AGENT_NODES nodes with ten pods per node as
# bench-e2e. Writes bench/results/e2e-burst-slow-agent.csv and .txt.
SLOW_AGENT_NODES ?= 50
SLOW_AGENT_DELAYS ?= 0,100ms,500ms,2s
SLOW_AGENT_SCHEDULERS ?= floor,ours,ours-upstream

bench-e2e-slow-agent:
	$(GO) run -tags e2e ./e2e/cmd/throughput --schedulers=$(SLOW_AGENT_SCHEDULERS) --agent-delays=$(SLOW_AGENT_DELAYS) \
		--nodes=$(SLOW_AGENT_NODES) --jobs=$$(( $(SLOW_AGENT_NODES) / 2 )) --pods-per-job=20 --idle=10s \
		--name=e2e-burst-slow-agent $(THROUGHPUT_FLAGS)

# The binding rule of issue 36 against the rule before it (one pending pod
# per node whatever its card count), each with the floor, in one
# invocation, RULES_ROUNDS rounds at RULES_DELAYS (hack/bench-rules.sh;
# bench/results/e2e-burst-rules.txt and .csv).
bench-e2e-rules:
	GO=$(GO) ./hack/bench-rules.sh

# Where the node agents' CPU goes during the burst: the floor's and ours'
# bursts at agent delay 0, every agent sampled by perf (root; linux-perf),
# top functions per scheduler (bench/results/e2e-agent-profile.txt).
bench-e2e-agent-profile:
	GO=$(GO) ./hack/agent-profile.sh

# The e2e harness builds etcd, kube-apiserver, vc-controller-manager and kwok
# once per machine into $XDG_CACHE_HOME (or ~/.cache)/vshare-e2e/<go.sum hash>
# (about 10 minutes cold on 2 cores, more with module downloads), and this
# project's binaries on every run.
E2E_FLAGS ?=
DEMO_FLAGS ?=

# The real node (e2e/realnode: kubelet, containerd, the chart from the
# images) runs after the rest, alone: its SM-share measurements and the
# main suite's must not share the two cores. It needs root and Debian's
# containerd, containernetworking-plugins and runc (.ci/run installs them).
e2e: e2e-suite
	$(MAKE) e2e-real-node

e2e-suite:
	$(GO) test -tags e2e $$($(GO) list -tags e2e ./e2e/... | grep -v '/e2e/realnode$$') -v -timeout 60m -count=1 $(E2E_FLAGS)

# hack/e2e-real-node.sh also writes the output, with the commit, date and
# machine, to bin/e2e-real-node.txt (bench/results/e2e-real-node.txt is the
# run the docs quote).
e2e-real-node:
	GO=$(GO) ./hack/e2e-real-node.sh $(E2E_FLAGS)

demo:
	$(GO) run -tags e2e ./e2e/cmd/demo $(DEMO_FLAGS)

# The randomized fault campaign alone, long: even seeds run with the node
# lock; the scheduler-crash-mid-session fault uses deviceshare's test-only
# VSHARE_TEST_CRASH_AT_BIND hook. `make e2e` runs TestFaultCampaign with seeds
# 1,2 of 40s each. hack/faults.sh writes the summary (command, commit, date,
# machine, per-seed fault counts, violations) to bench/results/faults.txt
# and the full output to bin/faults.log.
FAULT_SEEDS    ?= 1-10
FAULT_DURATION ?= 4m

faults:
	GO=$(GO) FAULT_SEEDS=$(FAULT_SEEDS) FAULT_DURATION=$(FAULT_DURATION) ./hack/faults.sh $(E2E_FLAGS)

clean:
	rm -rf $(BIN)
	$(MAKE) -C libvgpu clean

# Container images, built here without a container engine (package images,
# cmd/vshare-images; docs/install.md "Images"): vc-scheduler,
# vgpu-device-plugin, and the end-to-end tests' pause and cuda-workload, one
# OCI image layout tarball each in bin/images/<name>.tar, named
# $(REGISTRY)/<name>:$(TAG) (`ctr -n k8s.io images import` takes that name;
# `bin/vshare-images push --archive ... --to ...` uploads one). libvgpu.so,
# the agent's cgo and the workload compile against Debian bullseye's glibc
# 2.31 (images/debian.lock, downloaded once into $XDG_CACHE_HOME/vshare).
# Same checkout, same digests; SOURCE_DATE_EPOCH sets the files' time
# (default 0). IMAGES=vc-scheduler,pause builds only those. Then helm's
# --set image.registry=...,image.tag=... (docs/install.md).
REGISTRY      ?= ghcr.io/vgpushare
TAG           ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The images stage's build is the first of the two that images'
# TestBuildIsReproducible compares, so the unit stage builds once, not
# twice (with the default registry, which the test builds for).
ifeq ($(REGISTRY),ghcr.io/vgpushare)
test: export VSHARE_IMAGES_BUILT := $(abspath $(BIN)/images)
test: export VSHARE_IMAGES_TAG := $(TAG)
endif
IMAGES        ?=
# helm runs from the module proxy in its own module graph, like kwok in e2e/.
HELM_VERSION  := v3.22.0
HELM          ?= $(GO) run helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
DEPLOY        := deploy
DEPLOY_HEADER := \# Generated by `make deploy-manifests` from $(DEPLOY)/helm/vshare; do not edit.

.PHONY: images deploy-manifests deploy-check

images:
	$(GO) build -o $(BIN)/vshare-images ./cmd/vshare-images
	$(BIN)/vshare-images build --go $(GO) --registry $(REGISTRY) --tag $(TAG) --out $(BIN)/images $(if $(IMAGES),--image $(IMAGES))

# The plain manifests are the chart rendered with its default values (the
# ServiceMonitors on their own), but for the allocation key Secret, which
# users create (docs/install.md): a generated key would be published here.
# e2e/deploy_test.go fails when they drift.
PLAIN_SET     := --set allocationKey.create=false

deploy-manifests:
	{ echo '$(DEPLOY_HEADER)'; $(HELM) template vshare $(DEPLOY)/helm/vshare --namespace volcano-system --kube-version v1.30.2 $(PLAIN_SET); } > $(DEPLOY)/manifests/vshare.yaml
	{ echo '$(DEPLOY_HEADER)'; $(HELM) template vshare $(DEPLOY)/helm/vshare --namespace volcano-system --kube-version v1.30.2 \
		--set metrics.serviceMonitor.enabled=true --show-only templates/servicemonitors.yaml; } > $(DEPLOY)/manifests/servicemonitors.yaml

# The deployment checks alone: manifests, dashboard and docs against the
# code, then the chart's variants dry-run against a local kube-apiserver.
deploy-check:
	$(GO) test -count=1 ./$(DEPLOY)/ ./docs/
	$(GO) test -tags e2e -run 'TestDeploy' ./e2e/ -v -count=1
