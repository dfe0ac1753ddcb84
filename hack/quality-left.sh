#!/bin/sh
# Where the unplaced GPU is at 130% arrival (docs/quality.md, "The limit"):
# cmd/modelmix on the five tuning traces at seed 42 for fragment, FGD and
# the offline packing (quality.OfflinePacking's placement, which knows the
# arrivals): the free GPU by card model and by what is left on a card,
# and the pods each left out. Writes $QUALITY_OUT/quality-left.txt
# (bench/results). About 3 minutes on one core.
set -eu

GO=${GO:-go}
DIR=${QUALITY_TRACE_DIR:-bench/testdata/openb}
OUT=${QUALITY_OUT:-bench/results}
mkdir -p "$OUT"
f="$OUT/quality-left.txt"
. hack/provenance.sh
{
	echo "# hack/quality-left.sh (make quality-left); regenerate, do not edit"
	provenance
} >"$f"
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
"$GO" build -o "$bin" ./bench/quality/cmd/modelmix
for t in default gpushare100 multigpu50 gpuspec33 cpu250; do
	echo "" >>"$f"
	echo "\$ go run ./bench/quality/cmd/modelmix --trace-dir $DIR --trace $t --seed 42 --at 130 --policies fragment,fgd,offline --top 6" >>"$f"
	echo "$t" >&2
	"$bin" --trace-dir "$DIR" --trace "$t" --seed 42 --at 130 --policies fragment,fgd,offline --top 6 2>/dev/null >>"$f"
done
echo "wrote $f" >&2
