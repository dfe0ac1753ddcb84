#!/usr/bin/env bash
# Regenerates the committed openb files in this directory: every file listed
# in SHA256SUMS (the GPU node list and the 24 pod lists, hashes of the plain
# CSV files as alibaba/clusterdata publishes them) is fetched, checked and
# written gzipped (gzip -n -9: no name or time stamp, so the output depends
# only on the input and the gzip version). Nothing is written unless every
# file checks out.
#
#   bench/testdata/openb/fetch.sh             download from GitHub
#   bench/testdata/openb/fetch.sh DIR         copy from a local directory of the CSV files
#                                             (a clusterdata checkout's csv/, or the
#                                             simulator's data/csv/)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="${1:-}"
base="https://raw.githubusercontent.com/alibaba/clusterdata/master/cluster-trace-gpu-v2023/csv"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

while read -r sum name; do
	if [[ -n "$src" ]]; then
		cp "$src/$name" "$tmp/$name"
	else
		curl -fsSL --retry 3 -o "$tmp/$name" "$base/$name"
	fi
	got="$(sha256sum "$tmp/$name" | cut -d' ' -f1)"
	if [[ "$got" != "$sum" ]]; then
		echo "fetch.sh: $name: sha256 $got, want $sum" >&2
		exit 1
	fi
done <"$here/SHA256SUMS"

while read -r _ name; do
	gzip -n -9 -c "$tmp/$name" >"$here/$name.gz"
	echo "fetch.sh: $name.gz ok"
done <"$here/SHA256SUMS"
