#!/usr/bin/env bash
# Runs the Go tests once per supported Slurm version (what `make test` runs):
#   22.05  every package (unit tests, and the real-Slurm tests on the host's
#          Debian 12 packages; test/moto's contract tests against moto run
#          here only, once: they need no Slurm)
#   24.11, 26.05  the packages whose tests drive real Slurm daemons (those
#          importing test/harness or test/stack), against the Debian roots
#          scripts/slurm-roots.sh built (BURST_SLURM=<version>)
#   <version>+rest  the e2e lifecycle, spot, fault, capacity, HA and GPU health tests (REST_TESTS)
#          again with burst talking to Slurm through slurmrestd
#          (BURST_SLURM_API=rest; the tests above use the command line)
#
#   scripts/test-matrix.sh [VERSION...]      (default: 22.05 24.11 26.05)
#
# Environment: GO (default go), BURST_BIN (burst's binaries, from make build),
# TEST_TIMEOUT (per go test, default 75m), MATRIX_PARALLEL (1: run the
# versions side by side, the default; 0: one after another), GOTESTFLAGS,
# REST_TESTS (the -run pattern of the +rest runs; empty: none).
# Each version's output goes to a log that is printed whole when it ends;
# a summary with the wall time of each follows. Fails if any version fails.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
TEST_TIMEOUT=${TEST_TIMEOUT:-75m}
MATRIX_PARALLEL=${MATRIX_PARALLEL:-1}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22.05 24.11 26.05)
REST_TESTS=${REST_TESTS-'^(TestSingleGPUJob|TestTwoNodeJob|TestAllOrNothingFailure|TestResumeTwice|TestSpotInterruption|TestFault.*|TestCapacity.*|TestHA.*|TestGPUHealth.*|TestEFA.*|TestScheduled.*)$'}
# Version-blind e2e tests (capacity types, HA, the head node's and a node's own
# faults: they call versionBlind) run
# once per backend, on 22.05 with the command line and 26.05 through
# slurmrestd; the other runs leave them out with -skip rather than report
# them skipped.
VERSION_BLIND='^(TestCapacity.*|TestHA.*|TestEFA.*|TestScheduled.*|TestFaultStoreLocked|TestFaultStateDirFull|TestFaultNodeSpoolFull|TestFaultNodeClockAhead)$'
runs=("${versions[@]}")
if [ -n "$REST_TESTS" ]; then
  for v in "${versions[@]}"; do runs+=("$v+rest"); done
fi

mod=$($GO list -m)
# Real-Slurm packages that run on 22.05 only, and why.
# examples/train: its PyTorch job's weights must equal a reference run made
# outside Slurm with the same torch; the reference uses the host's
# python3-torch (1.13), and the Debian roots hold no torch.
declare -A host_only=([examples/train]="the PyTorch reference run uses the host's python3-torch; the roots have none")
# packages whose tests start real Slurm: test/harness itself and every
# package whose tests import it or test/stack
mapfile -t slurm_pkgs < <($GO list -f '{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}' ./... |
  awk -v h="$mod/test/harness" -v s="$mod/test/stack" '{ for (i = 1; i <= NF; i++) if ($i == h || $i == s) { print $1; next } }' |
  while read -r p; do [ -n "${host_only[${p#"$mod"/}]:-}" ] || echo "$p"; done)
[ ${#slurm_pkgs[@]} -gt 0 ] || { echo "test-matrix: found no package that runs real Slurm" >&2; exit 1; }

logdir=$(mktemp -d /tmp/burst-test-matrix.XXXXXX)
trap 'rm -rf "$logdir"' EXIT

run_version() { # run_version VERSION[+rest]: go test, output to $logdir/RUN.log, status to .rc, seconds to .secs
  local run=$1 v=${1%+rest} t0 rc=0
  t0=$(date +%s)
  if [ "$run" != "$v" ]; then
    local blind=()
    [ "$v" = 26.05 ] || blind=(-skip "$VERSION_BLIND")
    # shellcheck disable=SC2086
    BURST_SLURM=$v BURST_SLURM_API=rest $GO test -count=1 -timeout "$TEST_TIMEOUT" ${GOTESTFLAGS:-} -run "$REST_TESTS" "${blind[@]}" ./test/e2e >"$logdir/$run.log" 2>&1 || rc=$?
  elif [ "$v" = 22.05 ]; then
    # shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
    BURST_SLURM=$v $GO test -count=1 -timeout "$TEST_TIMEOUT" ${GOTESTFLAGS:-} ./... >"$logdir/$run.log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2086
    BURST_SLURM=$v $GO test -count=1 -timeout "$TEST_TIMEOUT" ${GOTESTFLAGS:-} -skip "$VERSION_BLIND" "${slurm_pkgs[@]}" >"$logdir/$run.log" 2>&1 || rc=$?
  fi
  echo $(($(date +%s) - t0)) >"$logdir/$run.secs"
  echo "$rc" >"$logdir/$run.rc"
}

report() { # report VERSION
  local v=$1
  echo "=== Slurm $v ($(cat "$logdir/$v.secs") s, exit $(cat "$logdir/$v.rc")) ==="
  cat "$logdir/$v.log"
}

echo "test-matrix: Slurm ${versions[*]}${REST_TESTS:+ (and e2e $REST_TESTS through slurmrestd)}; real-Slurm packages run on every version: ${slurm_pkgs[*]#"$mod"/}"
for p in "${!host_only[@]}"; do echo "test-matrix: $p runs on 22.05 only: ${host_only[$p]}"; done
t0=$(date +%s)
if [ "$MATRIX_PARALLEL" = 1 ]; then
  for v in "${runs[@]}"; do
    run_version "$v" &
  done
  left=("${runs[@]}")
  while [ ${#left[@]} -gt 0 ]; do
    wait -n || true
    still=()
    for v in "${left[@]}"; do
      if [ -f "$logdir/$v.rc" ]; then report "$v"; else still+=("$v"); fi
    done
    left=("${still[@]}")
  done
  wait
else
  for v in "${runs[@]}"; do
    run_version "$v"
    report "$v"
  done
fi

echo
echo "test-matrix summary (wall $(($(date +%s) - t0)) s, parallel=$MATRIX_PARALLEL):"
fail=0
for v in "${runs[@]}"; do
  rc=$(cat "$logdir/$v.rc")
  printf '  Slurm %-11s %-4s %5s s\n' "$v" "$([ "$rc" = 0 ] && echo ok || echo FAIL)" "$(cat "$logdir/$v.secs")"
  [ "$rc" = 0 ] || fail=1
done
exit $fail
