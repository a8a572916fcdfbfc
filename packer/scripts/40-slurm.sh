#!/bin/bash
# 40-slurm.sh: munge and slurmd of the head node's Slurm version.
# Ubuntu 22.04 ships Slurm 21.08, so slurmd is built from SchedMD's release
# tarball (checked against SLURM_SHA256). Neither munge nor slurmd starts at
# boot: burst-bootstrap installs the cluster's munge key first, then starts
# both with the node's name from the user data.
set -euo pipefail
log() { echo "burst-image 40-slurm: $*"; }
: "${SLURM_VERSION:?set by the packer template}"
: "${SLURM_SHA256:?set by the packer template}"
: "${SLURM_UID:?set by the packer template}"
files=/tmp/burst-files
case $SLURM_VERSION in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "burst-image 40-slurm: slurm_version '$SLURM_VERSION' is not X.Y.Z" >&2; exit 1 ;;
esac

log "munge"
apt-get update -q
apt-get install -y -q --no-install-recommends munge libmunge-dev
systemctl disable --now munge.service
# The package generates a key; a node must only ever hold the cluster's.
rm -f /etc/munge/munge.key

log "slurm user (uid $SLURM_UID)"
getent group slurm >/dev/null || groupadd --system --gid "$SLURM_UID" slurm
getent passwd slurm >/dev/null ||
  useradd --system --uid "$SLURM_UID" --gid slurm --home-dir /var/lib/slurm --shell /usr/sbin/nologin slurm

if command -v slurmd >/dev/null 2>&1 && slurmd -V | grep -qx "slurm $SLURM_VERSION"; then
  log "slurmd $SLURM_VERSION already installed"
else
  log "building Slurm $SLURM_VERSION"
  apt-get install -y -q --no-install-recommends build-essential bzip2 pkg-config \
    libhwloc-dev libjson-c-dev libyaml-dev libhttp-parser-dev libjwt-dev liblua5.3-dev \
    libpam0g-dev libreadline-dev libdbus-1-dev libpmix-dev libnvidia-ml-dev libcurl4-openssl-dev
  build=$(mktemp -d)
  tarball="$build/slurm-$SLURM_VERSION.tar.bz2"
  curl -fsSL -o "$tarball" "https://download.schedmd.com/slurm/slurm-$SLURM_VERSION.tar.bz2"
  echo "$SLURM_SHA256  $tarball" | sha256sum -c --quiet - ||
    { echo "burst-image 40-slurm: checksum mismatch for slurm-$SLURM_VERSION.tar.bz2 (variable slurm_sha256)" >&2; exit 1; }
  tar -xjf "$tarball" -C "$build"
  # Ubuntu installs PMIx under a versioned directory configure does not search
  pmix=()
  for d in /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/pmix; do
    if [ -f "$d/include/pmix.h" ] || [ -f "$d/lib/libpmix.so" ]; then pmix=(--with-pmix="$d"); break; fi
  done
  (
    cd "$build/slurm-$SLURM_VERSION"
    ./configure --quiet --prefix=/usr --sysconfdir=/etc/slurm --libdir=/usr/lib/x86_64-linux-gnu \
      --with-munge --with-hwloc --with-json --with-yaml --with-http-parser --with-jwt \
      --with-nvml --enable-pam "${pmix[@]}"
    make -j"$(nproc)" >/dev/null
    make install >/dev/null
  )
  ldconfig
  rm -rf "$build"
fi

install -d -m 0755 /etc/slurm /var/spool/slurmd /var/log/slurm
install -m 0644 "$files/slurmd.service" /etc/systemd/system/slurmd.service
systemctl daemon-reload
systemctl disable slurmd.service 2>/dev/null || true
log "done: $(slurmd -V)"
