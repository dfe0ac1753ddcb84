#!/usr/bin/env bash
# install-tool.sh GO PKG@VERSION OUT: `go install` PKG@VERSION, outside
# this module's graph, into the file OUT (the Makefile's tools, named by
# version in the user's cache). Installs into a temporary directory and
# renames, so an interrupted install never leaves a half-written OUT that
# make would take as up to date.
set -euo pipefail
go=$1 pkg=$2 out=$3
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
GOBIN=$tmp GOWORK=off GOFLAGS=-buildvcs=false "$go" install "$pkg"
name=${pkg%@*}
mv "$tmp/${name##*/}" "$out"
