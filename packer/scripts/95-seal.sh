#!/bin/bash
# 95-seal.sh: the last step. Remove every SSH authorized key the build
# left (Packer's temporary key pair, cloud-init's for the build user, any
# root key) and the host keys, so no one who held the build's key can log
# in to a node; instances get their own from cloud-init at first boot
# (only when burst.yaml's image.key_name asks for one). The build's SSH
# session stays open until Packer ends it.
set -euo pipefail
log() { echo "burst-image 95-seal: $*"; }
removed=0
while IFS= read -r -d '' f; do
  rm -f -- "$f"
  removed=$((removed + 1))
done < <(find / -xdev \( -name authorized_keys -o -name authorized_keys2 \) -path '*/.ssh/*' -print0 2>/dev/null)
rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub
left=$(find / -xdev \( -name authorized_keys -o -name authorized_keys2 \) -path '*/.ssh/*' 2>/dev/null | head -1)
if [ -n "$left" ]; then
  echo "burst-image 95-seal: FAIL an authorized keys file remains: $left" >&2
  exit 1
fi
log "removed $removed authorized keys file(s) and the host keys"
