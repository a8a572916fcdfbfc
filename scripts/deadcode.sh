#!/usr/bin/env bash
# deadcode.sh GO TOOL: production functions no program reaches (deadcode
# from golang.org/x/tools, tests not counted as callers). Test support that
# only tests use by design (test/, the fakes, the *test helper packages,
# generated clients and the generators go generate runs) is left out; the
# findings listed in scripts/deadcode-known.txt are known debt; anything
# else fails.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${1:-go}
tool=${2:-golang.org/x/tools/cmd/deadcode@v0.51.0}
found=$(CGO_ENABLED=0 "$go" run "$tool" ./... |
	grep -Ev '^(test/|internal/[a-z/]*(fake|test)/|(sizer|agent)/[a-z/]*test/|internal/slurm/rest/internal/gen/|internal/catalog/gen/|internal/slurm/rest/v[0-9]+/)' |
	sed -E 's/:[0-9]+:[0-9]+:/:/' || true)
new=$(comm -23 <(printf '%s\n' "$found" | sed '/^$/d' | sort) <(grep -v '^#' scripts/deadcode-known.txt | sort))
if [[ -n $new ]]; then
	printf '%s\n' "$new"
	echo "deadcode: no program reaches the functions above: remove them, or call them where they are meant to be used" >&2
	exit 1
fi
