#!/usr/bin/env bash
# What the fleet scenario's producer hosts need on this machine, installed
# once: debootstrap and systemd-nspawn (hack/packages.sh: apt-get, as root),
# then their root filesystems (Debian 12 with systemd, sshd and the Awa
# producer venv; Debian 11 with systemd and sshd), built with debootstrap and
# cached in /var/cache/awa-operations, reused by every run until their recipe
# (tests/awa_testbed/rootfs.py) changes. About three minutes and 580 MB the
# first time, a second afterwards.
#
#     bash hack/hosts.sh
set -euo pipefail

log() { printf '[hosts] %s\n' "$*" >&2; }

bash "$(dirname "${BASH_SOURCE[0]}")/packages.sh" molecule

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" hosts
started=$SECONDS
trees=$(python -m awa_testbed rootfs | xargs)
log "root filesystems $trees ready in $((SECONDS - started))s"
