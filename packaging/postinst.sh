#!/bin/sh
# burst package: after install or upgrade (deb postinst, rpm %post).
# Creates the burst user and its directories; never touches
# /etc/burst/burst.yaml (a conffile: the package manager keeps the admin's).
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers /usr/lib/sysusers.d/burst.conf
elif ! getent passwd burst >/dev/null; then
  groupadd --system burst 2>/dev/null || true
  useradd --system --gid burst --home-dir /var/lib/burst --no-create-home \
    --shell /usr/sbin/nologin --comment "burst sizer" burst
fi
# Slurm's hooks run as SlurmUser (slurm on packaged Slurm) and share the
# state directory with the sizer
if getent passwd slurm >/dev/null && command -v usermod >/dev/null 2>&1; then
  usermod -a -G burst slurm || true
fi
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/burst.conf || true
fi
for d in /var/lib/burst /var/log/burst; do
  mkdir -p "$d"
  chgrp burst "$d"
  chmod 0770 "$d"
done
chown burst "/var/lib/burst"
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  # an upgrade restarts a running sizer, which migrates its database on start
  systemctl try-restart burst-sizer.service || true
fi
exit 0
