#!/usr/bin/env bash
# duplicates.sh [REV] [duplicates options...]: the `duplicates` report on
# the whole tree at REV (default: the working tree's HEAD plus uncommitted
# changes), generated code left out (files marked "Code generated ... DO
# NOT EDIT."; see https://go.dev/s/generatedcode).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=""
if [[ $# -gt 0 && $1 != -* ]]; then rev=$1; shift; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -n $rev ]]; then
	git archive "$rev" | tar -x -C "$tmp"
else
	git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tmp" 2>/dev/null || true
fi
grep -rlZ --include='*.go' -E '^// Code generated .* DO NOT EDIT\.$' "$tmp" | xargs -0 -r rm -f
duplicates --repo "$tmp" --seconds 300 "$@" | sed "s#$tmp/##g"
