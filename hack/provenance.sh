# Sourced by hack/bench.sh, hack/bench-profile.sh and hack/quality-*.sh: provenance prints the
# lines every results file starts with after its command line (commit, date,
# machine, CPUs, load, Go), as "# key: value". Needs $GO.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- . ':!bench/results' 2>/dev/null || commit="$commit (with uncommitted changes)"
provenance() {
	echo "# commit: $commit"
	echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "# machine: $(uname -a)"
	echo "# nproc: $(nproc); cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
	echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# go: $($GO version)"
}
