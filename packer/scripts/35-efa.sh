#!/bin/bash
# 35-efa.sh: the Elastic Fabric Adapter stack for multi-node jobs: AWS's
# aws-efa-installer (EFA kernel driver, rdma-core, libfabric with its efa
# provider) and the aws-ofi-nccl plugin that lets NCCL use libfabric, so
# NCCL's traffic between nodes goes over the EFA interfaces burst attaches
# (one per network card) instead of TCP. Both downloads are checked against
# their checksums before use.
set -euo pipefail
log() { echo "burst-image 35-efa: $*"; }
: "${EFA_INSTALLER_VERSION:?set by the packer template (variable efa_installer_version)}"
: "${EFA_INSTALLER_SHA256:?set by the packer template (variable efa_installer_sha256)}"
: "${OFI_NCCL_VERSION:?set by the packer template (variable ofi_nccl_version)}"
: "${OFI_NCCL_SHA256:?set by the packer template (variable ofi_nccl_sha256)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -x /opt/amazon/efa/bin/fi_info ] && modinfo efa >/dev/null 2>&1; then
  log "EFA driver and libfabric already installed"
else
  curl -fsSL -o "$work/efa.tar.gz" "https://efa-installer.amazonaws.com/aws-efa-installer-$EFA_INSTALLER_VERSION.tar.gz"
  echo "$EFA_INSTALLER_SHA256  $work/efa.tar.gz" | sha256sum -c --quiet - ||
    { echo "burst-image 35-efa: checksum mismatch for aws-efa-installer-$EFA_INSTALLER_VERSION.tar.gz (variable efa_installer_sha256)" >&2; exit 1; }
  tar -xzf "$work/efa.tar.gz" -C "$work"
  # -y: no questions; the kernel module is built for the running (held) kernel
  (cd "$work/aws-efa-installer" && ./efa_installer.sh -y)
  log "installed aws-efa-installer $EFA_INSTALLER_VERSION"
fi

plugin() { ls /opt/amazon/ofi-nccl/lib*/libnccl-net*.so >/dev/null 2>&1; }
if plugin; then
  log "aws-ofi-nccl already installed"
else
  # built against the installer's libfabric and the image's CUDA
  apt-get install -y -q build-essential libhwloc-dev
  src="aws-ofi-nccl-$OFI_NCCL_VERSION"
  curl -fsSL -o "$work/ofi-nccl.tar.gz" "https://github.com/aws/aws-ofi-nccl/releases/download/v$OFI_NCCL_VERSION/$src.tar.gz"
  echo "$OFI_NCCL_SHA256  $work/ofi-nccl.tar.gz" | sha256sum -c --quiet - ||
    { echo "burst-image 35-efa: checksum mismatch for $src.tar.gz (variable ofi_nccl_sha256)" >&2; exit 1; }
  tar -xzf "$work/ofi-nccl.tar.gz" -C "$work"
  cuda=$(find /usr/local -maxdepth 1 -name 'cuda*' -type d | sort -V | tail -1)
  [ -n "$cuda" ] || { echo "burst-image 35-efa: no CUDA under /usr/local to build aws-ofi-nccl against" >&2; exit 1; }
  (cd "$work/$src" && ./configure --prefix=/opt/amazon/ofi-nccl --with-libfabric=/opt/amazon/efa --with-cuda="$cuda" &&
    make -j"$(nproc)" && make install)
  log "built aws-ofi-nccl $OFI_NCCL_VERSION against $cuda"
fi
echo /opt/amazon/ofi-nccl/lib > /etc/ld.so.conf.d/burst-ofi-nccl.conf
ldconfig
