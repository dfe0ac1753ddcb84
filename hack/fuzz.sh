#!/usr/bin/env bash
# Run every Go fuzz target for FUZZTIME each (default 10m), one after another,
# one worker each, so the run stays on one core. Go keeps the inputs that found
# new coverage in its build cache; this script copies them into the package's
# testdata/fuzz/<Target>/ so the corpus is committed and `go test` (and so
# `make test`) replays it. A crasher is written there too and fails the script.
#
#   hack/fuzz.sh                 all targets, 10 minutes each
#   FUZZTIME=30s hack/fuzz.sh    a quick pass
#   hack/fuzz.sh ./config        only the targets under one package
set -uo pipefail
cd "$(dirname "$0")/.."
: "${FUZZTIME:=10m}"
: "${FUZZ_PARALLEL:=1}"
log=${FUZZ_LOG:-_output/fuzz}
mkdir -p "$log"
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
fi
fail=0
for pkg in "${pkgs[@]}"; do
	for target in $(grep -h '^func Fuzz' "$pkg"/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do
		name=$(echo "${pkg#./}" | tr / _)_$target
		before=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null | wc -l)
		start=$(date +%s)
		if go test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" "$pkg" >"$log/$name.log" 2>&1; then
			status=ok
		else
			status=FAIL; fail=1
		fi
		cache="$(go env GOCACHE)/fuzz/$(go list "$pkg")/$target"
		if [ -d "$cache" ]; then
			mkdir -p "$pkg/testdata/fuzz/$target"
			cp -n "$cache"/* "$pkg/testdata/fuzz/$target"/ 2>/dev/null || true
		fi
		after=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null | wc -l)
		execs=$(grep -o 'execs: [0-9]*' "$log/$name.log" | tail -1 | awk '{print $2}')
		printf '%-5s %-45s %5ss  execs=%-10s corpus %s -> %s\n' "$status" "$pkg $target" "$(( $(date +%s) - start ))" "${execs:-?}" "$before" "$after" | tee -a "$log/summary.txt"
		[ "$status" = ok ] || tail -30 "$log/$name.log"
	done
done
exit $fail
