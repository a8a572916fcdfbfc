#!/bin/bash
# 20-nvidia.sh: NVIDIA driver, fabric manager (NVSwitch types p4d/p4de/p5/p5e)
# and DCGM. Keeps the base AMI's driver when it has one.
set -euo pipefail
log() { echo "burst-image 20-nvidia: $*"; }
: "${NVIDIA_DRIVER_BRANCH:?set by the packer template}"
files=/tmp/burst-files

if modinfo nvidia >/dev/null 2>&1; then
  log "driver already present: $(modinfo -F version nvidia)"
else
  log "installing nvidia-driver-${NVIDIA_DRIVER_BRANCH}-server"
  apt-get update -q
  apt-get install -y -q "linux-headers-$(uname -r)" \
    "nvidia-driver-${NVIDIA_DRIVER_BRANCH}-server" "nvidia-utils-${NVIDIA_DRIVER_BRANCH}-server"
fi
driver=$(modinfo -F version nvidia)
branch=${driver%%.*}
log "driver $driver (branch $branch)"

cat > /etc/modprobe.d/blacklist-nouveau.conf <<'CONF'
blacklist nouveau
options nouveau modeset=0
CONF

# NVIDIA's CUDA repository carries fabric manager and DCGM for every branch.
if [ ! -f /usr/share/keyrings/cuda-archive-keyring.gpg ]; then
  : "${CUDA_KEYRING_SHA256:?set by the packer template (variable cuda_keyring_sha256)}"
  curl -fsSL -o /tmp/cuda-keyring.deb \
    https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb
  echo "$CUDA_KEYRING_SHA256  /tmp/cuda-keyring.deb" | sha256sum -c --quiet - ||
    { echo "burst-image 20-nvidia: checksum mismatch for cuda-keyring_1.1-1_all.deb (variable cuda_keyring_sha256)" >&2; exit 1; }
  dpkg -i /tmp/cuda-keyring.deb
  rm -f /tmp/cuda-keyring.deb
fi
apt-get update -q

# Fabric manager must be exactly the driver's version.
if ! command -v nv-fabricmanager >/dev/null 2>&1; then
  fm=$(apt-cache madison "nvidia-fabricmanager-${branch}" | awk -v d="$driver" '$3 ~ "^"d"-" {print $3; exit}')
  if [ -z "$fm" ]; then
    echo "burst-image 20-nvidia: no nvidia-fabricmanager-${branch} package for driver $driver" >&2
    exit 1
  fi
  apt-get install -y -q "nvidia-fabricmanager-${branch}=${fm}"
  apt-mark hold "nvidia-fabricmanager-${branch}" >/dev/null
fi
# Run fabric manager only where NVSwitch exists (checked at each boot).
install -m 0755 "$files/burst-has-nvswitch" /usr/local/sbin/burst-has-nvswitch
install -d /etc/systemd/system/nvidia-fabricmanager.service.d
install -m 0644 "$files/nvidia-fabricmanager-burst.conf" \
  /etc/systemd/system/nvidia-fabricmanager.service.d/burst.conf
systemctl enable nvidia-fabricmanager.service

# DCGM (GPU health and the agent's fallback telemetry).
if ! command -v dcgmi >/dev/null 2>&1; then
  apt-get install -y -q datacenter-gpu-manager
fi
systemctl enable nvidia-dcgm.service
systemctl enable nvidia-persistenced.service 2>/dev/null || true
log "done"
