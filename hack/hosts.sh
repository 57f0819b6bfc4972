#!/usr/bin/env bash
# What the fleet scenario's producer hosts need on this machine, installed
# once: debootstrap and systemd-nspawn (apt-get, as root), then their root
# filesystem (Debian 12 with systemd, sshd and the Awa producer venv), built
# with debootstrap and cached in /var/cache/awa-operations, reused by every
# run until its recipe (tests/awa_testbed/rootfs.py) changes. About a
# minute and 330 MB the first time, a second afterwards.
#
#     bash hack/hosts.sh
set -euo pipefail

log() { printf '[hosts] %s\n' "$*" >&2; }

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || missing+=(openssh-client)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        log "the fleet's producer hosts need ${missing[*]}: install them as root with apt-get (Debian/Ubuntu)"
        exit 1
    fi
    log "installing ${missing[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# shellcheck source=hack/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh" hosts
started=$SECONDS
tree=$(python -m awa_testbed rootfs)
log "root filesystem $tree ready in $((SECONDS - started))s"
