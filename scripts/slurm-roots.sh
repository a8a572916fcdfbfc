#!/usr/bin/env bash
# Builds, once per machine, the Debian roots that the tests and the demo run
# the non-host Slurm versions from, and rebuilds a root when it is stale.
#
#   scripts/slurm-roots.sh [VERSION...]      (default: every non-host version)
#   scripts/slurm-roots.sh --print-root VERSION   (the root this tree's recipe
#                           uses; fails, saying why, when it is not built)
#
# VERSION   Debian suite   root
# 22.05     bookworm       the host's own packages (nothing to build)
# 24.11     trixie         $BURST_SLURM_ROOTS/trixie-<recipe>
# 26.05     sid            $BURST_SLURM_ROOTS/sid-<recipe>
#
# <recipe> is a hash of what a root holds and how it is built (INCLUDE,
# LAYOUT below), so branches with different package lists share the machine
# without rebuilding each other's roots.
#
# Layout of the cache ($BURST_SLURM_ROOTS, default /var/cache/burst/slurm-roots):
#   <suite>-<recipe>        symlink to the current root of that suite and recipe
#   <suite>                 symlink to the root built last (for people)
#   <suite>-<slurm deb version>-<recipe>-<time>/   a root; never changed once built
#                           (/.burst-root inside it says what it holds)
#   <suite>-<recipe>.checked  sha256 of the mirror's InRelease last found to
#                           match that root (its mtime: last used)
#   <suite>.build.log       output of the last debootstrap
#   .lock-<suite>           flock: one build or check per suite at a time
#
# A root is stale, and rebuilt, when
#   - there is none for this recipe, or
#   - the mirror's InRelease for its suite changed since the last check AND
#     the mirror now has another version of a Slurm or munge package than
#     the root holds.
# When the mirror cannot be reached an existing root is kept (with a
# warning); a missing root that cannot be built fails, saying why.
#
# Builds are atomic: debootstrap writes to .build-<suite>-<pid>, which is
# renamed to its final name only once complete and verified, then the
# <suite> symlink is swapped (rename). A crash leaves only a .build-*
# directory, removed by the next run. Roots no link names, and recipes not
# used for 14 days, are deleted once no running harness has them mounted.
set -euo pipefail

CACHE=${BURST_SLURM_ROOTS:-/var/cache/burst/slurm-roots}
MIRROR=${BURST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What every root holds: Slurm's daemons and clients, munge, Slurm's JWT
# plugins (auth/jwt for slurmctld, rest_auth/jwt for slurmrestd), the CA
# certificates burst's AWS SDK client loads when AWS_CA_BUNDLE or
# SSL_CERT_FILE name Debian's bundle, nftables for the node bootstrap's IMDS
# firewall and iproute2 (internal/bootstrap's real-Slurm test bootstraps a
# node inside the root; its nft stand-in enters the node's network
# namespace with ip), and ps for debugging. Jobs and hooks in the tests need only the
# base system besides.
INCLUDE=slurmctld,slurmd,slurm-client,munge,slurmrestd,slurm-wlm-jwt-plugin,ca-certificates,nftables,iproute2,procps
# Packages whose version on the mirror decides whether a root is stale.
KEYPKGS=(slurmctld slurmd slurm-client slurmrestd slurm-wlm-basic-plugins slurm-wlm-jwt-plugin munge)
# Bump when the build steps below change in a way the package list does not show.
LAYOUT=1

log() { echo "slurm-roots: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

suite_of() {
  case "$1" in
    22.05) echo host ;;
    24.11) echo trixie ;;
    26.05) echo sid ;;
    *) die "unknown Slurm version \"$1\": supported are 22.05 (host), 24.11 (trixie), 26.05 (sid)" ;;
  esac
}

recipe() { printf '%s\n' "$INCLUDE" "$LAYOUT" | sha256sum | cut -c1-8; }

arch() { dpkg --print-architecture; }

# mirror_versions SUITE: "pkg=version" lines of KEYPKGS on the mirror, sorted.
mirror_versions() {
  local suite=$1
  curl -fsS --max-time 120 "$MIRROR/dists/$suite/main/binary-$(arch)/Packages.xz" | xz -dc |
    awk -v want="${KEYPKGS[*]}" '
      BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
      /^Package: / { p = $2 }
      /^Version: / { if (p in keep) print p "=" $2 }' | sort -u
}

# root_versions DIR: "pkg=version" lines of KEYPKGS installed in the root.
root_versions() {
  dpkg-query --admindir="$1/var/lib/dpkg" -W -f '${Package}=${Version}\n' "${KEYPKGS[@]}" 2>/dev/null | sort -u
}

stamp_get() { # stamp_get ROOT KEY
  sed -n "s/^$2=//p" "$1/.burst-root" 2>/dev/null | head -n1
}

inrelease_sha() { # prints the sha256 of the suite's InRelease, or fails
  curl -fsS --max-time 30 "$MIRROR/dists/$1/InRelease" | sha256sum | cut -d' ' -f1
}

in_use() { # in_use DIR: a running harness has the root mounted (overlay lowerdir)
  grep -qsF "lowerdir=$1," /proc/[0-9]*/mountinfo 2>/dev/null
}

prune() { # prune SUITE: drop recipes unused for 14 days, then roots no link names, unless in use
  local suite=$1 l d keep
  rm -f "$CACHE/$suite.checked" # the layout before recipe links
  for l in "$CACHE/$suite"-????????; do
    [ -L "$l" ] || continue
    [ "$l" = "$CACHE/$suite-$(recipe)" ] && continue
    if [ -z "$(find "$l.checked" -mtime -14 2>/dev/null)" ]; then
      log "dropping the $suite root of recipe ${l##*-}, unused for 14 days"
      rm -f "$l" "$l.checked"
    fi
  done
  for d in "$CACHE/$suite"-*/; do
    d=${d%/}
    if [ ! -d "$d" ] || [ -L "$d" ]; then continue; fi
    keep=
    for l in "$CACHE/$suite" "$CACHE/$suite"-????????; do
      [ -L "$l" ] && [ "$(readlink "$l")" = "$(basename "$d")" ] && keep=1
    done
    [ -n "$keep" ] && continue
    if in_use "$d"; then
      log "keeping old root $d: a running cluster uses it"
      continue
    fi
    rm -rf --one-file-system "$d"
  done
}

adopt() { # adopt SUITE: without a link for this recipe, link the newest complete root built by it
  local suite=$1 d found=
  [ -L "$CACHE/$suite-$(recipe)" ] && return 0
  for d in "$CACHE/$suite"-*-"$(recipe)"-*/; do
    d=${d%/}
    [ -f "$d/.burst-root" ] && [ "$(stamp_get "$d" RECIPE)" = "$(recipe)" ] && found=$d
  done
  [ -n "$found" ] || return 0
  log "using the existing $suite root $(basename "$found") (recipe $(recipe))"
  link_to "$suite-$(recipe)" "$(basename "$found")"
}

link_to() { # link_to NAME TARGET: atomically point $CACHE/NAME at TARGET
  ln -sfn "$2" "$CACHE/.link-$1-$$"
  mv -T "$CACHE/.link-$1-$$" "$CACHE/$1"
}

build() { # build SUITE INRELEASE_SHA
  local suite=$1 sha=$2 tmp t0 secs rel debver final
  rm -rf --one-file-system "$CACHE/.build-$suite-"*
  tmp="$CACHE/.build-$suite-$$"
  t0=$(date +%s)
  log "building the $suite root (debootstrap --variant=minbase --include=$INCLUDE $suite, $MIRROR) ..."
  if ! debootstrap --variant=minbase --include="$INCLUDE" "$suite" "$tmp" "$MIRROR" >"$CACHE/$suite.build.log" 2>&1; then
    tail -n 15 "$CACHE/$suite.build.log" >&2
    rm -rf --one-file-system "$tmp"
    die "debootstrap of $suite from $MIRROR failed (log $CACHE/$suite.build.log)"
  fi
  if ! rel=$(chroot "$tmp" /usr/sbin/slurmctld -V 2>&1); then
    rm -rf --one-file-system "$tmp"
    die "the new $suite root's slurmctld does not run: $rel"
  fi
  rel=${rel##* }
  debver=$(dpkg-query --admindir="$tmp/var/lib/dpkg" -W -f '${Version}' slurmctld)
  # the package cache and indexes are not needed to run; the harness gives
  # every cluster a private writable layer over this (read-only) root
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
  secs=$(($(date +%s) - t0))
  {
    echo "SUITE=$suite"
    echo "SLURM_RELEASE=$rel"
    echo "SLURM_DEB_VERSION=$debver"
    echo "PACKAGES=$(root_versions "$tmp" | tr '\n' ' ')"
    echo "INCLUDE=$INCLUDE"
    echo "RECIPE=$(recipe)"
    echo "MIRROR=$MIRROR"
    echo "INRELEASE_SHA256=$sha"
    echo "BUILT_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "BUILD_SECONDS=$secs"
  } >"$tmp/.burst-root"
  # the name goes into overlay mount options: no ":" or ","
  final="$suite-$(echo "$debver" | tr -c "A-Za-z0-9.\n" _)-$(recipe)-$(date -u +%Y%m%d%H%M%S)"
  mv -T "$tmp" "$CACHE/$final"
  link_to "$suite-$(recipe)" "$final"
  link_to "$suite" "$final"
  echo "$sha" >"$CACHE/$suite-$(recipe).checked"
  log "built $CACHE/$suite-$(recipe) -> $final: Slurm $rel in ${secs} s ($(du -sh "$CACHE/$final" | cut -f1))"
}

ensure() { # ensure VERSION
  local v=$1 suite root sha checked have want
  suite=$(suite_of "$v")
  [ "$suite" = host ] && return 0
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock-$suite"
  flock -w 900 9 || die "another build of the $suite root holds $CACHE/.lock-$suite for 15 minutes"
  root=$CACHE/$suite-$(recipe)
  adopt "$suite"
  if ! sha=$(inrelease_sha "$suite"); then
    if [ -f "$root/.burst-root" ]; then
      log "warning: cannot reach $MIRROR to check the $suite root for updates; using the cached one"
      exec 9>&-
      return 0
    fi
    die "the Slurm $v root ($suite) is not built and $MIRROR/dists/$suite/InRelease cannot be fetched: check the network or set BURST_DEBIAN_MIRROR"
  fi
  if [ ! -f "$root/.burst-root" ]; then
    build "$suite" "$sha"
  else
    checked=$(cat "$root.checked" 2>/dev/null || true)
    if [ "$sha" != "$checked" ]; then
      have=$(root_versions "$root")
      want=$(mirror_versions "$suite") || die "reading the $suite package index from $MIRROR failed"
      [ -n "$want" ] || die "the $suite package index on $MIRROR lists none of ${KEYPKGS[*]}"
      if [ "$have" != "$want" ]; then
        log "the $suite root is stale (root: $(echo "$have" | tr '\n' ' '); mirror: $(echo "$want" | tr '\n' ' ')): rebuilding"
        build "$suite" "$sha"
      else
        echo "$sha" >"$root.checked"
      fi
    fi
    touch "$root.checked"
  fi
  prune "$suite"
  log "Slurm $v: $(stamp_get "$root" SLURM_RELEASE) in $(readlink -f "$root")"
  exec 9>&-
}

print_root() { # print_root VERSION
  local v=$1 suite root
  suite=$(suite_of "$v")
  if [ "$suite" = host ]; then echo /; return 0; fi
  root=$CACHE/$suite-$(recipe)
  [ -f "$root/.burst-root" ] || die "Slurm $v: no Debian $suite root for this tree's recipe $(recipe) at $root: build it with \`make deps\` or \`scripts/slurm-roots.sh $v\` (as root)"
  readlink -f "$root"
}

main() {
  if [ "${1:-}" = --print-root ]; then
    [ $# = 2 ] || die "usage: slurm-roots.sh --print-root VERSION"
    print_root "$2"
    return
  fi
  [ "$(id -u)" = 0 ] || die "building Slurm roots needs root (debootstrap); run as root (sudo make deps)"
  local versions=("$@")
  [ ${#versions[@]} -gt 0 ] || versions=(24.11 26.05)
  for v in "${versions[@]}"; do suite_of "$v" >/dev/null; done
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  local pids=() v rc=0
  # builds are mostly download and unpack: run them side by side
  for v in "${versions[@]}"; do
    ensure "$v" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ "$rc" = 0 ] || die "a Slurm root could not be built or checked (see above)"
}

main "$@"
