#!/bin/sh
# Placement quality on Alibaba's openb trace (docs/quality.md), as `make
# quality` runs it: all 24 pod lists, every policy, seeds 42-51, two jobs at
# once. Writes, under $QUALITY_OUT (bench/results):
#   quality.csv        one row per trace x policy (means, seed spread, tuning)
#   quality-seeds.csv  one row per trace x policy x seed
#   quality-traces.svg the key policies across the 24 traces
#   quality-<t>.svg    allocation against arrival, for the five tuning traces
#   quality.md         the markdown report, headed by how and where it was made
# Arguments are passed to the command after the defaults, so they override
# them (the last of a repeated flag wins): hack/quality.sh --parallel 1.
set -eu

GO=${GO:-go}
DIR=${QUALITY_TRACE_DIR:-bench/testdata/openb}
OUT=${QUALITY_OUT:-bench/results}
mkdir -p "$OUT"
md=$(mktemp)
trap 'rm -f "$md"' EXIT

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- 2>/dev/null; then
	commit="$commit, with uncommitted changes"
fi
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t0=$(date +%s)

set -- --trace-dir "$DIR" --traces all --policies all --seeds 42-51 --parallel 2 --bound \
	--csv "$OUT/quality.csv" --seeds-csv "$OUT/quality-seeds.csv" --svg "$OUT" \
	--markdown-file "$md" "$@"
echo "$GO run ./bench/quality/cmd/quality $*" >&2
"$GO" run ./bench/quality/cmd/quality "$@"
wall=$(( $(date +%s) - t0 ))
# The command as run, the report's own path for the temporary file.
cmdline=$(echo "$*" | sed "s|$md|$OUT/quality.md|")

{
	echo "# Placement quality on the openb pod lists"
	echo
	echo "Written by \`hack/quality.sh\` (\`make quality\`); regenerate, do not edit. How to read it: docs/quality.md."
	echo
	echo "- command: \`go run ./bench/quality/cmd/quality $cmdline\`"
	echo "- commit: $commit"
	echo "- started: $started; wall time $((wall / 60)) min $((wall % 60)) s"
	echo "- machine: \`$(uname -a)\`, $(nproc) CPUs"
	echo "- Go: $("$GO" version)"
	echo
	cat "$md"
} >"$OUT/quality.md"
echo "wrote $OUT/quality.md" >&2
