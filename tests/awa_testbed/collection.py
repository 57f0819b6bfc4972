"""Make this checkout importable and runnable as the collection ``awa.operations``.

Python code imports ``ansible_collections.awa.operations...``, and
ansible/ansible-playbook look collections up in ANSIBLE_COLLECTIONS_PATH; both
need a folder ``ansible_collections/awa/operations``. A symlink to the live
tree serves both (ansible-tooling.md §2).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _provides_us(root: Path) -> bool:
    candidate = root / "ansible_collections" / "awa" / "operations"
    return candidate.exists() and candidate.resolve() == REPO


def collections_path() -> Path:
    """A collections root holding this checkout as awa.operations (made once per process)."""
    for entry in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep):
        if entry and _provides_us(Path(entry)):
            return Path(entry)
    root = Path(tempfile.mkdtemp(prefix="awa-collections-"))
    # Only a symlink lives in there; remove the folder when this process ends.
    atexit.register(shutil.rmtree, root, True)
    link = root / "ansible_collections" / "awa" / "operations"
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO)
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(root)
    return root


def make_importable() -> Path:
    root = collections_path()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root
