#!/usr/bin/env bash
# The Debian packages the steps of the test command need besides Python and
# PyPI, installed with apt-get (as root) when a command they provide is
# missing. The one place the test command installs system packages:
# hack/test.sh runs it once, for the steps it runs, before any step starts
# (dpkg takes a lock, so two steps side by side must not install at once).
#
#     bash hack/packages.sh molecule functional
#
# To add a package: one line "step command package" in the table below (a
# package that installs no command: the absolute path of a file it installs).
set -euo pipefail

# step        command on PATH (or file)   Debian 12 package   used by
needed=(
    "molecule   debootstrap      debootstrap"              # the fleet hosts' root filesystem (hack/hosts.sh)
    "molecule   systemd-nspawn   systemd-container"        # the fleet hosts
    "molecule   ssh              openssh-client"           # Ansible and testinfra to the fleet hosts
    "molecule   ssh-keygen       openssh-client"           # the hosts' login and host keys
    "integration ssh-keygen      openssh-client"           # ansible-test's key pair, made first (hack/integration.sh)
    "functional java             openjdk-17-jre-headless"  # ansible-rulebook (test_eda_shard_advice.py)
    "functional /usr/sbin/pgbouncer pgbouncer"             # the connection pooler (test_pgbouncer*.py)
    "functional /usr/lib/python3/dist-packages/psycopg/__init__.py python3-psycopg"  # install paths (test_install_paths.py)
    "functional /usr/lib/python3.11/ensurepip/__init__.py python3-venv"             # a venv of the system Python (same)
)

log() { printf '[packages] %s\n' "$*" >&2; }

missing=()
for entry in "${needed[@]}"; do
    read -r step command package <<<"$entry"
    [[ " $* " == *" $step "* ]] || continue
    if [[ $command == /* ]]; then [ -e "$command" ] && continue; else command -v "$command" >/dev/null && continue; fi
    [[ " ${missing[*]} " == *" $package "* ]] || missing+=("$package")
done
[ ${#missing[@]} -gt 0 ] || exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "the steps $* need ${missing[*]}: install them as root with apt-get (Debian/Ubuntu), or run as root"
    exit 1
fi
log "installing ${missing[*]} with apt-get"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
