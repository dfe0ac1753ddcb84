#!/usr/bin/env bash
# test-cold.sh runs CI's command (.ci/run, which runs make test) on a fresh
# clone of a commit with every cache empty, as CI's clean clone on a new
# machine would: Go's build cache (GOCACHE), the module cache (GOMODCACHE),
# the e2e harness's built control plane and real-node binaries
# ($XDG_CACHE_HOME/vshare-e2e), staticcheck's cache and the project's own
# tools ($XDG_CACHE_HOME/vshare/tools). Modules come from the configured proxy
# (GOPROXY), as in CI; they are downloaded first, timed on their own, so
# that the network's share is apart from the build's.
#
# With CACHES=kept, the clone is fresh but the caches are this user's
# (GOCACHE, GOMODCACHE and XDG_CACHE_HOME as they are): what CI's clean
# clone of main sees on a runner that keeps ~/.cache between runs, each
# run compiling what the commits since the last one changed.
#
# It writes the stage times (hack/stages.sh's table), the download time,
# the caches' sizes at the end and the provenance to OUT (default
# bench/results/make-test-cold.txt) in this checkout.
#
# Usage: hack/test-cold.sh [COMMIT]   (default HEAD; must be committed)
# Environment: OUT, KEEP=1 keeps the work directory (several GB),
# CACHES=empty (default) or kept.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
here=$(pwd)
rev=$(git rev-parse --verify "${1:-HEAD}^{commit}") || exit 2
caches=${CACHES:-empty}
case $caches in
empty) out=${OUT:-bench/results/make-test-cold.txt} ;;
kept) out=${OUT:-bench/results/make-test-fresh-clone.txt} ;;
*)
	echo "test-cold: CACHES=$caches: want empty (every cache empty) or kept (this user's caches)" >&2
	exit 2
	;;
esac
case $out in /*) ;; *) out="$here/$out" ;; esac

work=$(mktemp -d /tmp/vshare-cold.XXXXXX)
# mktemp -d makes the directory 0700; libvgpu's suite runs some cases as
# nobody, who must reach the test binaries, as in any checkout.
chmod 0755 "$work"
cleanup() { [ -n "${KEEP:-}" ] && echo "test-cold: kept $work" || rm -rf "$work"; }
trap cleanup EXIT
git clone --quiet --no-local --no-checkout "$here" "$work/src" || exit 1
git -C "$work/src" checkout --quiet "$rev" || exit 1

if [ "$caches" = empty ]; then
	export GOCACHE="$work/cache/go-build"
	export GOMODCACHE="$work/gomod"
	export XDG_CACHE_HOME="$work/cache"
	mkdir -p "$GOCACHE" "$GOMODCACHE"
	what="with empty GOCACHE, GOMODCACHE and XDG_CACHE_HOME"
else
	export GOCACHE=$("$GO" env GOCACHE) GOMODCACHE=$("$GO" env GOMODCACHE)
	export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
	what="with this user's caches kept (GOCACHE=$GOCACHE, GOMODCACHE=$GOMODCACHE, XDG_CACHE_HOME=$XDG_CACHE_HOME)"
fi

secs() { echo $(( $(date +%s) - $1 )); }
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
cd "$work/src" || exit 1
# The clone's commit, the date, machine and load as the run starts.
source "$here/hack/provenance.sh"
prov=$(provenance)
t=$(date +%s)
dl_rc=0
for mod in $(git ls-files '*go.mod'); do
	(cd "$(dirname "$mod")" && "$GO" mod download) || dl_rc=$?
done
dl=$(secs "$t")

t=$(date +%s)
.ci/run >"$work/ci.log" 2>&1
rc=$?
ci=$(secs "$t")

{
	echo "# command: CACHES=$caches hack/test-cold.sh $rev (go mod download for each go.mod, then .ci/run, on a fresh clone $what)"
	echo "$prov"
	echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# goproxy: $($GO env GOPROXY)"
	printf '%-16s %8s  %s\n' "go mod download" "$(fmt "$dl")" "$([ "$dl_rc" -eq 0 ] && echo ok || echo "FAILED (exit $dl_rc)")"
	grep -v '^#' bin/stage-times.txt 2>/dev/null || echo "(no stage table: .ci/run ended before make test's stages)"
	printf '%-16s %8s  %s\n' ".ci/run" "$(fmt "$ci")" "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")"
	printf '%-16s %8s\n' "all" "$(fmt $((dl + ci)))"
	echo "# caches at the end: $(du -sh "$GOCACHE" | cut -f1) build cache, $(du -sh "$GOMODCACHE" | cut -f1) modules, $(du -sh "$XDG_CACHE_HOME/vshare-e2e" 2>/dev/null | cut -f1) e2e harness"
	if [ "$rc" -ne 0 ]; then
		echo "# .ci/run's failures:"
		grep -E -- '^(--- )?FAIL|FAIL |: \*\*\*|panic:' "$work/ci.log" | head -60 | sed 's/^/#   /'
		echo "# .ci/run's last lines:"
		tail -40 "$work/ci.log" | sed 's/^/#   /'
	fi
} >"$out"
cp "$work/ci.log" /tmp/make-test-cold.log && echo "test-cold: .ci/run's whole log: /tmp/make-test-cold.log" >&2
cat "$out"
exit "$rc"
