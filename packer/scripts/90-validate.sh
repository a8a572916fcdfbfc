#!/bin/bash
# 90-validate.sh: fail the build if any piece of the node image is missing.
# Every check runs; the failures are listed together.
set -uo pipefail
: "${SLURM_VERSION:?set by the packer template}"
fails=0
ok() { echo "burst-image validate: ok   $*"; }
bad() { echo "burst-image validate: FAIL $*" >&2; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }
kernel=$(uname -r)

# OS
check "ubuntu 22.04" grep -qx 'VERSION_ID="22.04"' /etc/os-release
check "unattended-upgrades masked" test "$(systemctl is-enabled unattended-upgrades.service 2>/dev/null)" = masked
check "sysctl settings" test -f /etc/sysctl.d/90-burst.conf
check "kernel held" sh -c 'apt-mark showhold | grep -qx linux-aws'
check "nftables.service masked (it would flush the IMDS firewall)" test "$(systemctl is-enabled nftables.service 2>/dev/null)" = masked

# NVIDIA
check "nvidia kernel module for $kernel" modinfo -k "$kernel" nvidia
check "nvidia-smi installed" command -v nvidia-smi
if grep -qx 0x10de /sys/bus/pci/devices/*/vendor 2>/dev/null; then
  check "nvidia-smi sees the build instance's GPU" nvidia-smi -L
fi
driver=$(modinfo -k "$kernel" -F version nvidia 2>/dev/null)
check "fabric manager installed" command -v nv-fabricmanager
check "fabric manager matches driver $driver" sh -c "nv-fabricmanager --version | grep -q '$driver'"
check "fabric manager gated on NVSwitch" test -x /usr/local/sbin/burst-has-nvswitch
check "fabric manager enabled" systemctl is-enabled nvidia-fabricmanager.service
check "DCGM installed" command -v dcgmi
check "DCGM enabled" systemctl is-enabled nvidia-dcgm.service
check "nouveau blacklisted" test -f /etc/modprobe.d/blacklist-nouveau.conf

# Lustre
check "lustre module for $kernel" modinfo -k "$kernel" lustre
check "mount.lustre installed" command -v mount.lustre

# EFA (multi-node jobs)
check "EFA kernel module" modinfo -k "$kernel" efa
check "libfabric with the efa provider" test -x /opt/amazon/efa/bin/fi_info
check "aws-ofi-nccl plugin" sh -c 'ls /opt/amazon/ofi-nccl/lib*/libnccl-net*.so'

# munge + Slurm
check "munged installed" command -v munged
check "no munge key baked in" test ! -e /etc/munge/munge.key
check "munge not started at boot" sh -c '! systemctl is-enabled munge.service'
check "slurmd is Slurm $SLURM_VERSION" sh -c "slurmd -V | grep -qx 'slurm $SLURM_VERSION'"
check "scontrol installed" command -v scontrol
check "slurmd unit installed" test -f /etc/systemd/system/slurmd.service
check "slurmd not started at boot" sh -c '! systemctl is-enabled slurmd.service'
check "slurm user" getent passwd slurm

# burst
check "burst-agent installed" test -x /usr/local/bin/burst-agent
check "burst-agent runs" /usr/local/bin/burst-agent --help
check "burst-bootstrap enabled" systemctl is-enabled burst-bootstrap.service
check "IMDS firewall unit enabled" systemctl is-enabled burst-imds-firewall.service
check "IMDS firewall rules parse" nft -c -f /etc/burst/imds-firewall.nft
check "slurmd requires the IMDS firewall" grep -q '^Requires=.*burst-imds-firewall.service' /etc/systemd/system/slurmd.service
check "no burst credential baked in" test ! -e /run/burst/agent.credential -a ! -e /var/lib/burst-agent/identity.nonce
check "burst-agent unit installed" test -f /etc/systemd/system/burst-agent.service
check "units verify" systemd-analyze verify /etc/systemd/system/burst-bootstrap.service \
  /etc/systemd/system/burst-agent.service /etc/systemd/system/slurmd.service /etc/systemd/system/burst-imds-firewall.service
check "/etc/burst/version" grep -q "^burst_version=" /etc/burst/version

if [ "$fails" -ne 0 ]; then
  echo "burst-image validate: $fails check(s) failed; the image is incomplete" >&2
  exit 1
fi

# Everything is in place: leave a clean first boot behind.
rm -rf /tmp/burst-files
cloud-init clean --logs >/dev/null 2>&1 || true
truncate -s 0 /etc/machine-id
echo "burst-image validate: all checks passed"
