# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every import a guide shows runs: the Python a guide calls is public (docs/public_interface.yml)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"
IMPORT = re.compile(r"^from (ansible_collections\.awa\.operations\.\S+) import (.+)$", re.MULTILINE)
SHOWN = sorted({(guide.name, module, names) for guide in DOCS.glob("*.md")
                for module, names in IMPORT.findall(guide.read_text(encoding="utf-8"))})


def test_the_guides_show_python_imports():
    assert SHOWN, f"no guide under {DOCS} shows an import of the collection's Python"


@pytest.mark.parametrize("guide, module, names", SHOWN)
def test_a_guide_s_import_runs(guide, module, names):
    imported = importlib.import_module(module)
    missing = [name.strip() for name in names.split(",") if not hasattr(imported, name.strip())]
    assert not missing, f"{guide}: {module} has no {', '.join(missing)}"
