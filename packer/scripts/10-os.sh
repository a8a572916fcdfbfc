#!/bin/bash
# 10-os.sh: base OS packages and kernel settings for a burst GPU node.
# Supported base: Ubuntu 22.04 (AWS Deep Learning Base GPU AMI or plain Ubuntu).
# Reboots at the end when it installed a newer kernel, so the NVIDIA and
# Lustre kernel modules of the next scripts are built for the kernel the
# image boots (the template sets expect_disconnect for this script).
set -euo pipefail
log() { echo "burst-image 10-os: $*"; }

# shellcheck source=/dev/null
. /etc/os-release
if [ "${ID:-}" != ubuntu ] || [ "${VERSION_ID:-}" != 22.04 ]; then
  echo "burst-image 10-os: unsupported base OS ${PRETTY_NAME:-unknown}; use an Ubuntu 22.04 base AMI (variable base_ami_name)" >&2
  exit 1
fi

# A node must never run apt at boot: it holds the dpkg lock, costs seconds to
# minutes and can swap the kernel under the baked-in modules.
log "disabling automatic updates"
systemctl disable --now unattended-upgrades.service apt-daily.timer apt-daily-upgrade.timer 2>/dev/null || true
systemctl mask apt-daily.service apt-daily-upgrade.service unattended-upgrades.service
cat > /etc/apt/apt.conf.d/20auto-upgrades <<'CONF'
APT::Periodic::Update-Package-Lists "0";
APT::Periodic::Unattended-Upgrade "0";
CONF
# Wait (up to 10 min) for a dpkg lock held by cloud-init or a timer started
# before we masked it, in this and every later script.
echo 'DPkg::Lock::Timeout "600";' > /etc/apt/apt.conf.d/90burst-lock-timeout

log "installing base packages"
apt-get update -q
apt-get install -y -q --no-install-recommends \
  ca-certificates curl gnupg jq chrony numactl hwloc pciutils \
  nfs-common rsync util-linux kmod perl nftables
# burst-imds-firewall.service loads burst's table; nftables.service would
# flush the whole ruleset (and burst's IMDS rule with it) when started or
# reloaded: masked, so nothing reopens instance metadata to jobs.
systemctl mask nftables.service

# Kernel: newest linux-aws, then held, so DKMS (NVIDIA) and the FSx Lustre
# client modules match the kernel the image boots.
before=$(uname -r)
apt-get install -y -q linux-aws
apt-mark hold linux-aws linux-image-aws linux-headers-aws >/dev/null
newest=$(find /boot -maxdepth 1 -name 'vmlinuz-*-aws' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V | tail -1)

log "kernel and network settings"
cat > /etc/sysctl.d/90-burst.conf <<'CONF'
# burst GPU node (packer/scripts/10-os.sh)
# Slurm high-throughput guidance: larger accept and SYN queues for slurmd
# message bursts (job launch fan-out, srun step traffic).
net.core.somaxconn = 4096
net.ipv4.tcp_max_syn_backlog = 8192
# Larger neighbour tables for clusters with hundreds of nodes.
net.ipv4.neigh.default.gc_thresh1 = 8192
net.ipv4.neigh.default.gc_thresh2 = 16384
net.ipv4.neigh.default.gc_thresh3 = 32768
# Wider socket buffers (NCCL over TCP, checkpoint traffic).
net.core.rmem_max = 67108864
net.core.wmem_max = 67108864
# GPU jobs pin their own memory; automatic NUMA balancing only adds jitter.
kernel.numa_balancing = 0
vm.swappiness = 0
CONF
# No hugepage reservation: GPU training does not use it and it takes memory
# from jobs; transparent hugepages stay at the Ubuntu default (madvise).

cat > /etc/security/limits.d/90-burst.conf <<'CONF'
# RDMA/NCCL pin memory; many open files for data loaders
*    soft memlock unlimited
*    hard memlock unlimited
*    soft nofile  131072
*    hard nofile  131072
CONF

# Amazon Time Sync Service: munge credentials fail with clock skew.
if ! grep -q '169.254.169.123' /etc/chrony/chrony.conf; then
  echo 'server 169.254.169.123 prefer iburst minpoll 4 maxpoll 4' >> /etc/chrony/chrony.conf
fi
systemctl enable chrony.service

swapoff -a
sed -i '/\sswap\s/d' /etc/fstab
timedatectl set-timezone UTC

if [ "$newest" != "$before" ]; then
  log "kernel $before -> $newest: rebooting"
  # let the shell provisioner return before the connection drops
  (sleep 2; systemctl reboot) >/dev/null 2>&1 &
fi
log "done"
