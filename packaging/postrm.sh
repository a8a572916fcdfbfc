#!/bin/sh
# burst package: after removal (deb postrm, rpm %postun). Keeps the state
# (/var/lib/burst: the spend ledger) and the user: delete them by hand.
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
exit 0
