#!/usr/bin/env bash
# stages.sh runs make's stages one after the other (make test: lint, images,
# unit, ...), stops at the first that fails, and ends with each stage's
# wall time, so that a slow run says where its time went. The table also
# goes to bin/stage-times.txt, with the commit, date and machine.
# Usage: hack/stages.sh STAGE...
set -uo pipefail
cd "$(dirname "$0")/.."
: "${MAKE:=make}"
: "${GO:=go}"
out=bin/stage-times.txt
mkdir -p bin
source hack/provenance.sh
names=() secs=() rcs=()
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
report() {
	local total=0
	{
		echo "# make test stage times (hack/stages.sh $*)"
		provenance
		for i in "${!names[@]}"; do
			local st=ok
			[ "${rcs[$i]}" -eq 0 ] || st="FAILED (exit ${rcs[$i]})"
			printf '%-16s %8s  %s\n' "${names[$i]}" "$(fmt "${secs[$i]}")" "$st"
			total=$((total + secs[i]))
		done
		printf '%-16s %8s\n' total "$(fmt "$total")"
	} >"$out"
	echo
	echo "== stage times =="
	grep -v '^#' "$out"
}
for stage in "$@"; do
	start=$(date +%s)
	$MAKE --no-print-directory "$stage"
	rc=$?
	names+=("$stage") secs+=($(($(date +%s) - start))) rcs+=("$rc")
	if [ "$rc" -ne 0 ]; then
		report "$@"
		exit "$rc"
	fi
done
report "$@"
