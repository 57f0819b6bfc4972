"""The root filesystem of the fleet's producer hosts: Debian 12 with systemd, built once per machine.

``debootstrap`` builds it from Debian's packages; a setup step then adds the
login user (sudo), the service user and a venv with awa-pg and psycopg from
wheels the controller downloads from PyPI, so the hosts never reach PyPI
themselves. The tree is cached under /var/cache/awa-operations (outside any
checkout) and reused by every run; a change of the recipe below (packages,
setup, pinned versions) builds a new one. Hosts boot read-only overlays of
it (tests/awa_testbed/hosts.py). Needs root, ``debootstrap`` and
``systemd-nspawn``: ``bash hack/hosts.sh`` installs both with apt-get.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import lifecycle
from .processes import TESTS_DIR

CACHE_DIR = Path(os.environ.get("AWA_FLEET_ROOTFS_CACHE", "/var/cache/awa-operations"))
SUITE = "bookworm"
MIRROR = os.environ.get("AWA_FLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "sudo", "python3", "python3-venv", "iproute2")
LOGIN_USER = "deploy"
SERVICE_USER = "awa"
VENV = "/opt/awa-producer"
# Where the hosts get the test bed's Python package (on the venv's path).
APP_DIR = f"{VENV}/app"
# Distributions the producers need, pinned by the project's requirements file.
WHEEL_DISTRIBUTIONS = ("awa-pg", "psycopg[binary]", "typing-extensions")
# Wheels for Debian 12's CPython 3.11 on x86_64, whatever Python the controller runs.
WHEEL_PLATFORM_ARGS = ("--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                       "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64")
UNUSED_BUILD_AGE = 24 * 3600

# Runs inside the new tree (systemd-nspawn, no boot), with the wheels at /wheels.
SETUP_SCRIPT = f"""
set -eu
useradd --system --user-group --home-dir /nonexistent --shell /usr/sbin/nologin {SERVICE_USER}
useradd --create-home --shell /bin/bash {LOGIN_USER}
echo '{LOGIN_USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{LOGIN_USER}
chmod 0440 /etc/sudoers.d/{LOGIN_USER}
python3 -m venv {VENV}
{VENV}/bin/pip install --quiet --no-index --find-links /wheels -r /wheels/requirements.txt
mkdir -p {APP_DIR}
echo {APP_DIR} > "$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/awa-app.pth"
{VENV}/bin/python -c 'import awa, psycopg'
# Each host gets its own host key when it is created.
rm -f /etc/ssh/ssh_host_*
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""


class RootfsError(RuntimeError):
    """The root filesystem cannot be built here; the message says what to do."""


def pinned_requirements(requirements: Path = TESTS_DIR.parent / "requirements" / "testbed.txt") -> list[str]:
    """The ``name==version`` lines of WHEEL_DISTRIBUTIONS in the project's requirements."""
    wanted = {name.lower() for name in WHEEL_DISTRIBUTIONS}
    pins = [line.strip() for line in requirements.read_text(encoding="utf-8").splitlines()
            if line.split("==", 1)[0].strip().lower() in wanted and "==" in line]
    if len(pins) != len(wanted):
        raise RootfsError(f"{requirements} must pin {', '.join(sorted(wanted))} with ==; found {pins}")
    return sorted(pins)


def recipe() -> dict:
    """Everything that decides the tree's content; its digest names the cached build."""
    return {"suite": SUITE, "mirror": MIRROR, "variant": "minbase", "packages": list(PACKAGES),
            "setup": SETUP_SCRIPT, "requirements": pinned_requirements(), "wheel_platform": list(WHEEL_PLATFORM_ARGS)}


def recipe_digest() -> str:
    return hashlib.sha256(json.dumps(recipe(), sort_keys=True).encode()).hexdigest()[:16]


def check_prerequisites() -> None:
    """Root, debootstrap and systemd-nspawn, or a message that says how to get them."""
    if os.geteuid() != 0:
        raise RootfsError("the fleet's producer hosts need root (debootstrap, overlay mounts, systemd-nspawn); "
                          "run the tests as root")
    missing = [tool for tool in ("debootstrap", "systemd-nspawn", "unshare", "nsenter", "ssh", "ssh-keygen")
               if shutil.which(tool) is None]
    if missing:
        raise RootfsError(f"{', '.join(missing)} not found: run `bash hack/hosts.sh` (as root it installs "
                          "debootstrap, systemd-container and openssh-client with apt-get)")


def nspawn_env() -> dict[str, str]:
    # This machine runs no systemd and mounts cgroup v1: nspawn must use the legacy hierarchy.
    return {**os.environ, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "0"}


def _run(argv: list[str], log: Path, what: str, **kwargs) -> None:
    with open(log, "ab") as output:
        result = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                check=False, **kwargs)
    if result.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
        raise RootfsError(f"{what} failed (exit {result.returncode}); the end of {log}:\n{tail}")


def _download_wheels(target: Path, log: Path) -> None:
    requirements = pinned_requirements()
    (target / "requirements.txt").write_text("\n".join(requirements) + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", *WHEEL_PLATFORM_ARGS,
          "-d", str(target), *requirements], log, "downloading the producers' wheels from PyPI")


def _build(tree: Path, log: Path) -> None:
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(tree), MIRROR],
         log, f"debootstrap {SUITE}")
    with tempfile.TemporaryDirectory(prefix="awa-fleet-wheels-") as wheels:
        _download_wheels(Path(wheels), log)
        _run(["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "-M", f"awa-rootfs-{os.getpid()}",
              "-D", str(tree), f"--bind-ro={wheels}:/wheels", "--pipe", "/bin/sh", "-c", SETUP_SCRIPT],
             log, "setting the tree up", env=nspawn_env())


def _prune_unused(keep: Path) -> None:
    """Drop builds of older recipes that no run has used for a day."""
    for build in CACHE_DIR.glob("rootfs-*"):
        stamp = build / ".last-used"
        if build == keep or not build.is_dir():
            continue
        if not stamp.exists() or time.time() - stamp.stat().st_mtime > UNUSED_BUILD_AGE:
            shutil.rmtree(build, ignore_errors=True)


def ensure_rootfs() -> Path:
    """The cached tree for the current recipe, built first if needed (about a minute, 330 MB)."""
    check_prerequisites()
    tree = CACHE_DIR / f"rootfs-{recipe_digest()}"
    with lifecycle.machine_lock(CACHE_DIR / "rootfs.lock"):
        if not (tree / ".complete").exists():
            staging = CACHE_DIR / f".building-{tree.name}"
            shutil.rmtree(staging, ignore_errors=True)
            log = CACHE_DIR / f"{tree.name}.log"
            log.write_text(json.dumps(recipe(), indent=2) + "\n", encoding="utf-8")
            started = time.monotonic()
            try:
                _build(staging, log)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            (staging / ".complete").write_text(f"built in {time.monotonic() - started:.0f}s\n", encoding="utf-8")
            staging.rename(tree)
            _prune_unused(keep=tree)
        (tree / ".last-used").touch()
    return tree


def login_ids(tree: Path, user: str = LOGIN_USER) -> tuple[int, int]:
    """uid and gid of ``user`` inside the tree (its /etc/passwd, not the controller's)."""
    for line in (tree / "etc" / "passwd").read_text(encoding="utf-8").splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise RootfsError(f"user {user} is missing from {tree}; delete the tree to rebuild it")
