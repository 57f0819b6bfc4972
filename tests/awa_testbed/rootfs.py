"""The root filesystems of the fleet's producer hosts: Debian 12 and Debian 11 with systemd, built once per machine.

``debootstrap`` builds each from Debian's packages; a setup step then adds the
login user (sudo) and the service user, and in Debian 12's a venv with awa-pg
and psycopg from wheels the controller downloads from PyPI, so the hosts never
reach PyPI themselves. Debian 11 has no venv: its Python 3.9 (which runs
Ansible's modules there) is older than awa-pg 0.6.9 needs (3.10), so its
producer units run the program from Debian 12's tree, mounted on the host as
their root directory (hosts.py, RUNTIME_ROOT). The tree is cached under /var/cache/awa-operations (outside any
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
from dataclasses import dataclass
from pathlib import Path

from . import lifecycle
from .processes import TESTS_DIR

CACHE_DIR = Path(os.environ.get("AWA_FLEET_ROOTFS_CACHE", "/var/cache/awa-operations"))
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
# Where a Debian 11 host finds Debian 12's tree (read-only), the root directory of its producer units.
RUNTIME_ROOT = "/opt/awa-runtime"

# Every tree: the units' user and the login user the controller connects as (passwordless sudo).
USERS_SCRIPT = f"""useradd --system --user-group --home-dir /nonexistent --shell /usr/sbin/nologin {SERVICE_USER}
useradd --create-home --shell /bin/bash {LOGIN_USER}
echo '{LOGIN_USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{LOGIN_USER}
chmod 0440 /etc/sudoers.d/{LOGIN_USER}
"""
# Each host gets its own host key when it is created; the package caches are not needed.
CLEANUP_SCRIPT = """rm -f /etc/ssh/ssh_host_*
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""

# Runs inside the new tree (systemd-nspawn, no boot), with the wheels at /wheels.
SETUP_SCRIPT = f"""
set -eu
{USERS_SCRIPT}python3 -m venv {VENV}
{VENV}/bin/pip install --quiet --no-index --find-links /wheels -r /wheels/requirements.txt
mkdir -p {APP_DIR}
echo {APP_DIR} > "$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/awa-app.pth"
{VENV}/bin/python -c 'import awa, psycopg'
{CLEANUP_SCRIPT}"""


# Debian 11: the same users, no venv; the app folder and the runtime root's mount point exist for the units.
SETUP_SCRIPT_BULLSEYE = f"""
set -eu
{USERS_SCRIPT}mkdir -p {APP_DIR} {RUNTIME_ROOT}
{CLEANUP_SCRIPT}"""


@dataclass(frozen=True)
class Release:
    """A Debian release the hosts can run: its suite, packages and setup; whether the producers' venv is in it."""

    suite: str
    packages: tuple[str, ...]
    setup: str
    producer_venv: bool


BOOKWORM = Release("bookworm", PACKAGES, SETUP_SCRIPT, producer_venv=True)
BULLSEYE = Release("bullseye", tuple(package for package in PACKAGES if package != "python3-venv"),
                   SETUP_SCRIPT_BULLSEYE, producer_venv=False)
RELEASES = {release.suite: release for release in (BOOKWORM, BULLSEYE)}


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


def recipe(release: Release = BOOKWORM) -> dict:
    """Everything that decides the tree's content; its digest names the cached build."""
    wanted = {"suite": release.suite, "mirror": MIRROR, "variant": "minbase", "packages": list(release.packages),
              "setup": release.setup}
    if release.producer_venv:
        wanted.update(requirements=pinned_requirements(), wheel_platform=list(WHEEL_PLATFORM_ARGS))
    return wanted


def recipe_digest(release: Release = BOOKWORM) -> str:
    return hashlib.sha256(json.dumps(recipe(release), sort_keys=True).encode()).hexdigest()[:16]


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


def _build(tree: Path, log: Path, release: Release) -> None:
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(release.packages)}", release.suite, str(tree),
          MIRROR], log, f"debootstrap {release.suite}")
    setup = ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "-M", f"awa-rootfs-{os.getpid()}",
             "-D", str(tree)]
    if not release.producer_venv:
        _run([*setup, "--pipe", "/bin/sh", "-c", release.setup], log, "setting the tree up", env=nspawn_env())
        return
    with tempfile.TemporaryDirectory(prefix="awa-fleet-wheels-") as wheels:
        _download_wheels(Path(wheels), log)
        _run([*setup, f"--bind-ro={wheels}:/wheels", "--pipe", "/bin/sh", "-c", release.setup],
             log, "setting the tree up", env=nspawn_env())


def _prune_unused(keep: Path) -> None:
    """Drop builds of older recipes that no run has used for a day."""
    for build in CACHE_DIR.glob("rootfs-*"):
        stamp = build / ".last-used"
        if build == keep or not build.is_dir():
            continue
        if not stamp.exists() or time.time() - stamp.stat().st_mtime > UNUSED_BUILD_AGE:
            shutil.rmtree(build, ignore_errors=True)


def ensure_rootfs(release: Release = BOOKWORM) -> Path:
    """The cached tree for the release's current recipe, built first if needed (about a minute, 330 MB; Debian 11's
    two minutes, 250 MB)."""
    check_prerequisites()
    tree = CACHE_DIR / f"rootfs-{recipe_digest(release)}"
    with lifecycle.machine_lock(CACHE_DIR / "rootfs.lock"):
        if not (tree / ".complete").exists():
            staging = CACHE_DIR / f".building-{tree.name}"
            shutil.rmtree(staging, ignore_errors=True)
            log = CACHE_DIR / f"{tree.name}.log"
            log.write_text(json.dumps(recipe(release), indent=2) + "\n", encoding="utf-8")
            started = time.monotonic()
            try:
                _build(staging, log, release)
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
