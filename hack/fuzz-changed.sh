#!/usr/bin/env bash
# Fuzz what a change touches: every fuzz target of every package with a .go
# file changed since the merge base of BASE and HEAD (committed, staged,
# unstaged or untracked), for FUZZTIME each (default 1m), one at a time on
# one worker (hack/fuzz.sh). It stops at the first failure, naming the
# target and the failing input Go wrote to the package's
# testdata/fuzz/<Target>/: commit that file with the fix, and `go test`
# replays it. The corpus the run grows stays in Go's cache (`make fuzz`
# commits corpora). Packages that only import a changed one are not fuzzed.
#
#   hack/fuzz-changed.sh                against origin/main, or main without it
#   BASE=HEAD~3 hack/fuzz-changed.sh    against another revision
#   FUZZTIME=5m hack/fuzz-changed.sh    longer
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FUZZTIME:=1m}"
if [ -z "${BASE:-}" ]; then
	BASE=main
	git rev-parse -q --verify origin/main >/dev/null && BASE=origin/main
fi
base=$(git merge-base "$BASE" HEAD) || { echo "fuzz-changed: no merge base of $BASE and HEAD" >&2; exit 2; }

mapfile -t dirs < <({
	git diff --name-only --no-renames "$base" -- '*.go'
	git ls-files --others --exclude-standard -- '*.go'
} | xargs -r -n1 dirname | sort -u)
pkgs=()
for d in "${dirs[@]}"; do
	if [ -d "$d" ] && grep -qs '^func Fuzz' "$d"/*_test.go; then
		pkgs+=("./$d")
	fi
done

echo "fuzz-changed: base $BASE (merge base $(git rev-parse --short "$base")), HEAD $(git rev-parse --short HEAD), $FUZZTIME per target"
if [ ${#pkgs[@]} -eq 0 ]; then
	echo "fuzz-changed: no changed package has a fuzz target"
	exit 0
fi
echo "fuzz-changed: ${pkgs[*]}"
FUZZTIME=$FUZZTIME FUZZ_FAIL_FAST=1 FUZZ_KEEP_CORPUS=0 FUZZ_LOG=${FUZZ_LOG:-_output/fuzz-changed} exec hack/fuzz.sh "${pkgs[@]}"
