#!/bin/sh
# Checks that a fresh clone of HEAD reproduces the committed per-seed
# placement values (bench/results/quality-seeds.csv) without touching
# them: clones HEAD into a temporary directory, runs the quality command
# there and compares every row it makes with the committed row of the
# same trace, policy and seed. Writes $QUALITY_OUT/quality-repro.txt
# (bench/results) with how, where and what was compared; exits 1 when a
# row differs or is missing from the committed file.
#
# QUALITY_REPRO_POLICIES and QUALITY_REPRO_SEEDS (default: ours and the
# reference policies, seeds 42-51, about 20 min on one core) and
# QUALITY_REPRO_BUILTIN_SEEDS (default 42: Volcano's built-in on one seed
# of every trace, about 4 min; empty to skip) choose what is rerun;
# QUALITY_REPRO_OUT_FILE names another output file,
# QUALITY_REPRO_COMMITTED another file to compare with.
set -eu

GO=${GO:-go}
OUT=${QUALITY_OUT:-bench/results}
POLICIES=${QUALITY_REPRO_POLICIES:-fragment,binpack,spread,fgd,bestfit,gpupacking,gpuclustering,dotprod,random}
SEEDS=${QUALITY_REPRO_SEEDS:-42-51}
BUILTIN_SEEDS=${QUALITY_REPRO_BUILTIN_SEEDS-42}
committed=${QUALITY_REPRO_COMMITTED:-bench/results/quality-seeds.csv}
f=${QUALITY_REPRO_OUT_FILE:-$OUT/quality-repro.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. hack/provenance.sh
git clone -q "$(git rev-parse --show-toplevel)" "$tmp/clone"
git -C "$tmp/clone" checkout -q "$(git rev-parse HEAD)"
{
	echo "# hack/quality-repro.sh (make quality-repro); regenerate, do not edit"
	provenance
	echo "# rerun in a fresh clone of that commit (the working tree's changes are not in it)"
} >"$f"

run() { # policies seeds csv
	echo "" >>"$f"
	echo "\$ go run ./bench/quality/cmd/quality --trace-dir bench/testdata/openb --traces all --policies $1 --seeds $2 --parallel 1 --seeds-csv $3" >>"$f"
	(cd "$tmp/clone" && /usr/bin/time -f 'wall %e s, user %U s' "$GO" run ./bench/quality/cmd/quality --trace-dir bench/testdata/openb \
		--traces all --policies "$1" --seeds "$2" --parallel 1 --seeds-csv "$tmp/$3") 2>"$tmp/err" >/dev/null ||
		{ cat "$tmp/err" >&2; exit 1; }
	grep -E '^(quality: |wall )' "$tmp/err" >>"$f"
}
run "$POLICIES" "$SEEDS" ours.csv
rerun="$tmp/ours.csv"
if [ -n "$BUILTIN_SEEDS" ]; then
	run volcano-builtin "$BUILTIN_SEEDS" builtin.csv
	tail -n +2 "$tmp/builtin.csv" >>"$rerun"
fi

echo "" >>"$f"
# Rows keyed by trace,policy,seed; every rerun row must be in the
# committed file, identical.
if awk -F, 'NR == FNR { if (FNR > 1) row[$1 "," $2 "," $3] = $0; next }
	FNR == 1 { next }
	{ n++; k = $1 "," $2 "," $3
	  if (!(k in row)) { miss++; print "missing from the committed file: " $0 }
	  else if (row[k] != $0) { diff++; print "differs: rerun " $0 " committed " row[k] } }
	END { printf "compared %d rerun rows with the committed file: %d identical, %d differ, %d missing\n", n, n - diff - miss, diff, miss
	      exit (diff + miss > 0) }' "$committed" "$rerun" >>"$f"; then
	rc=0
else
	rc=1
fi
tail -n 1 "$f" >&2
exit $rc
