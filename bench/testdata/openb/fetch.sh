#!/usr/bin/env bash
# Puts the openb files the quality benchmark needs into this directory,
# gzipped, after checking them against SHA256SUMS (hashes of the plain CSV
# files, as alibaba/clusterdata publishes them).
#
#   bench/testdata/openb/fetch.sh             download from GitHub
#   bench/testdata/openb/fetch.sh DIR         copy from a local openb csv/ directory
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
	gzip -n -9 -c "$tmp/$name" >"$here/$name.gz"
	echo "fetch.sh: $name.gz ok"
done <"$here/SHA256SUMS"
