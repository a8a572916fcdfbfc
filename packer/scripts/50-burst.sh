#!/bin/bash
# 50-burst.sh: burst-agent and the systemd units that bring a node up at boot.
set -euo pipefail
log() { echo "burst-image 50-burst: $*"; }
: "${BURST_VERSION:?set by the packer template}"
: "${SLURM_VERSION:?set by the packer template}"
files=/tmp/burst-files

if ! head -c 4 "$files/burst-agent" | grep -q 'ELF'; then
  echo "burst-image 50-burst: $files/burst-agent is not a Linux executable (variable burst_agent_binary)" >&2
  exit 1
fi
install -m 0755 "$files/burst-agent" /usr/local/bin/burst-agent

install -m 0644 "$files/burst-bootstrap.service" /etc/systemd/system/burst-bootstrap.service
install -m 0644 "$files/burst-agent.service" /etc/systemd/system/burst-agent.service
install -m 0644 "$files/burst-tmpfiles.conf" /etc/tmpfiles.d/burst.conf
install -d -m 0755 /etc/burst
# IMDS for root only, from early boot (before slurmd and the bootstrap)
install -m 0644 "$files/imds-firewall.nft" /etc/burst/imds-firewall.nft
install -m 0644 "$files/burst-imds-firewall.service" /etc/systemd/system/burst-imds-firewall.service
printf 'burst_version=%s\nslurm_version=%s\nbuilt=%s\n' "$BURST_VERSION" "$SLURM_VERSION" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  > /etc/burst/version

systemctl daemon-reload
# Only the bootstrap starts at boot; it starts munge, slurmd and the agent.
systemctl enable burst-imds-firewall.service burst-bootstrap.service
systemctl disable burst-agent.service 2>/dev/null || true

log "cleaning up"
apt-get clean
rm -rf /var/lib/apt/lists/*
log "done"
