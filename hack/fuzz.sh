#!/usr/bin/env bash
# Run every Go fuzz target for FUZZTIME each (default 10m), one after another,
# one worker each, so the run stays on one core. Go keeps the inputs that found
# new coverage in its build cache; this script copies them into the package's
# testdata/fuzz/<Target>/ so the corpus is committed and `go test` (and so
# `make test`) replays it. A crasher is written there too and fails the script,
# which names the target and the file.
#
#   hack/fuzz.sh                 all targets, 10 minutes each
#   FUZZTIME=30s hack/fuzz.sh    a quick pass
#   hack/fuzz.sh ./config        only the targets under one package
#   FUZZ_FAIL_FAST=1             stop at the first failing target
#   FUZZ_KEEP_CORPUS=0           leave the grown corpus in Go's cache
#                                (hack/fuzz-changed.sh sets both)
set -uo pipefail
cd "$(dirname "$0")/.."
: "${FUZZTIME:=10m}"
: "${FUZZ_PARALLEL:=1}"
: "${FUZZ_FAIL_FAST:=0}"
: "${FUZZ_KEEP_CORPUS:=1}"
log=${FUZZ_LOG:-_output/fuzz}
mkdir -p "$log"
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
	mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
fi

# failing_input names what failed in a target's log: the input Go wrote to
# testdata/fuzz/<Target>/ (relative to the package), or the corpus entry or
# seed that failed before fuzzing started.
failing_input() { # pkg target logfile
	local written entry
	written=$(sed -n 's/^ *Failing input written to \(.*\)$/\1/p' "$3" | tail -1)
	if [ -n "$written" ]; then
		echo "failing input written to ${1#./}/$written (re-run: go test -run '^$2\$/${written##*/}\$' $1)"
		return
	fi
	entry=$(sed -n "s/^failure while testing seed corpus entry: $2\/\(.*\)$/\1/p" "$3" | head -1)
	if [ -f "$1/testdata/fuzz/$2/$entry" ]; then
		echo "failing input: the committed corpus entry ${1#./}/testdata/fuzz/$2/$entry"
	elif [ -n "$entry" ]; then
		echo "failing input: the seed $entry (f.Add in $1)"
	else
		echo "no failing input recorded (build or setup failure)"
	fi
}

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
		if [ "$FUZZ_KEEP_CORPUS" = 1 ] && [ -d "$cache" ]; then
			mkdir -p "$pkg/testdata/fuzz/$target"
			cp -n "$cache"/* "$pkg/testdata/fuzz/$target"/ 2>/dev/null || true
		fi
		after=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null | wc -l)
		execs=$(grep -o 'execs: [0-9]*' "$log/$name.log" | tail -1 | awk '{print $2}')
		printf '%-5s %-45s %5ss  execs=%-10s corpus %s -> %s\n' "$status" "$pkg $target" "$(( $(date +%s) - start ))" "${execs:-?}" "$before" "$after" | tee -a "$log/summary.txt"
		[ "$status" = ok ] && continue
		tail -30 "$log/$name.log"
		echo "FAIL $pkg $target: $(failing_input "$pkg" "$target" "$log/$name.log"); log $log/$name.log" | tee -a "$log/summary.txt"
		[ "$FUZZ_FAIL_FAST" = 1 ] && exit 1
	done
done
exit $fail
