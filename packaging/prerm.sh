#!/bin/sh
# burst package: before removal (deb prerm, rpm %preun). Stops the sizer
# only when the package goes away, not on an upgrade.
set -e
case "$1" in
  remove|purge|0)
    if [ -d /run/systemd/system ]; then
      systemctl disable --now burst-sizer.service || true
    fi
    ;;
esac
exit 0
