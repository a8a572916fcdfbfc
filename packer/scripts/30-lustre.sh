#!/bin/bash
# 30-lustre.sh: Lustre client for Amazon FSx for Lustre, from AWS's FSx
# client repository, built for the running (held) kernel.
set -euo pipefail
log() { echo "burst-image 30-lustre: $*"; }
kernel=$(uname -r)

if modinfo -k "$kernel" lustre >/dev/null 2>&1 && command -v mount.lustre >/dev/null 2>&1; then
  log "lustre client already installed for $kernel"
  exit 0
fi
: "${FSX_KEY_SHA256:?set by the packer template (variable fsx_key_sha256)}"
curl -fsSL -o /tmp/fsx-ubuntu-public-key.asc https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc
echo "$FSX_KEY_SHA256  /tmp/fsx-ubuntu-public-key.asc" | sha256sum -c --quiet - ||
  { echo "burst-image 30-lustre: checksum mismatch for fsx-ubuntu-public-key.asc (variable fsx_key_sha256)" >&2; exit 1; }
gpg --dearmor --yes -o /usr/share/keyrings/fsx-ubuntu-public-key.gpg /tmp/fsx-ubuntu-public-key.asc
rm -f /tmp/fsx-ubuntu-public-key.asc
echo "deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu jammy main" \
  > /etc/apt/sources.list.d/fsxlustreclientrepo.list
apt-get update -q
if ! apt-cache show "lustre-client-modules-$kernel" >/dev/null 2>&1; then
  echo "burst-image 30-lustre: the FSx repository has no lustre-client-modules-$kernel;" \
    "available: $(apt-cache search --names-only '^lustre-client-modules-.*-aws$' | awk '{print $1}' | sort -V | tail -3 | tr '\n' ' ')" >&2
  echo "burst-image 30-lustre: use a base AMI with a kernel FSx supports" >&2
  exit 1
fi
apt-get install -y -q "lustre-client-modules-$kernel"
log "installed $(modinfo -k "$kernel" -F version lustre)"
