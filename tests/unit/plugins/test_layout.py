# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where code lives (CONTRIBUTING.md): module_utils and plugin_utils in packages by concern, every import downward.

A file imports files of its own package and of the rows below its own, never
a row above or beside it, and no two files import each other through any
chain; so a package can be read knowing only what lies below it. Every
package and top-level file of module_utils has its row here and its line in
CONTRIBUTING.md's tree. Only db/ knows psycopg's errors, and no file of
module_utils imports ``AnsibleModule``: the modules pass their class to
module_main.
"""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

import pytest

COLLECTION = Path(__file__).resolve().parents[3]
PLUGINS = COLLECTION / "plugins"
PREFIX = "ansible_collections.awa.operations.plugins."

# From the bottom up: each row's packages (folders) and top-level files (without .py) import only their own package
# and the rows below. plugin_utils (controller-side) stands above all of module_utils (which is shipped to hosts).
ORDER = (
    ("module_utils/errors", "module_utils/wording", "module_utils/masking"),
    ("module_utils/queue_rules",),
    ("module_utils/db", "module_utils/producer"),
    ("module_utils/schema",),
    ("module_utils/advice",),
    ("module_utils/info",),
    ("module_utils/change", "module_utils/info_run"),
    ("module_utils/module_main",),
    ("plugin_utils/rollout", "plugin_utils/advice_events"),
)
ROW = {place: row for row, places in enumerate(ORDER) for place in places}
SOURCES = sorted(path for folder in ("module_utils", "plugin_utils") for path in (PLUGINS / folder).rglob("*.py"))


def place(path: Path) -> str:
    """The package or top-level file a file of module_utils or plugin_utils belongs to: ``module_utils/info``."""
    folder, first = path.relative_to(PLUGINS).parts[:2]
    return f"{folder}/{first.removesuffix('.py')}"


def imported(path: Path) -> set[Path]:
    """The files of module_utils and plugin_utils that ``path`` imports (anywhere in it, functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            base = PLUGINS.joinpath(*node.module.removeprefix(PREFIX).split("."))
            for alias in node.names:
                # "from package import module" names a file; "from module import name" names the module.
                found.add(base / f"{alias.name}.py" if (base / f"{alias.name}.py").exists() else base.with_suffix(".py"))
        elif isinstance(node, ast.Import):
            found.update(PLUGINS.joinpath(*alias.name.removeprefix(PREFIX).split(".")).with_suffix(".py")
                         for alias in node.names if alias.name.startswith(PREFIX))
    return found


GRAPH = {path: imported(path) for path in SOURCES}


def test_the_graph_reads_the_imports():
    rule = PLUGINS / "module_utils" / "advice" / "rule.py"
    assert PLUGINS / "module_utils" / "advice" / "load_window.py" in GRAPH[rule]
    assert PLUGINS / "module_utils" / "db" / "connection.py" in GRAPH[PLUGINS / "module_utils" / "change" / "writes.py"]
    assert all(target.exists() for targets in GRAPH.values() for target in targets)


def test_every_package_and_top_level_file_has_its_row():
    assert sorted({place(path) for path in SOURCES} - ROW.keys()) == []
    assert sorted(ROW.keys() - {place(path) for path in SOURCES}) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PLUGINS)))
def test_every_import_runs_down_the_order(path):
    upward = [f"{target.relative_to(PLUGINS)} ({place(target)} is not below {place(path)})"
              for target in sorted(GRAPH[path])
              if place(target) != place(path) and ROW[place(target)] >= ROW[place(path)]]
    assert upward == []


def test_no_file_reaches_itself_through_its_imports():
    circles, state = [], {}

    def visit(path: Path, trail: list[Path]) -> None:
        state[path] = "open"
        for target in sorted(GRAPH[path]):
            if state.get(target) == "open":
                circles.append(" -> ".join(str(p.relative_to(PLUGINS)) for p in trail[trail.index(target):] + [target]))
            elif target not in state:
                visit(target, trail + [target])
        state[path] = "done"

    for path in SOURCES:
        if path not in state:
            visit(path, [path])
    assert circles == []


def test_only_db_knows_psycopg_and_its_errors():
    outside = [path for path in SOURCES if place(path) != "module_utils/db"]
    direct = [str(path.relative_to(PLUGINS)) for path in outside for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(node, (ast.Import, ast.ImportFrom))
              and any(name.split(".")[0] == "psycopg" for name in ([node.module or ""] if isinstance(node, ast.ImportFrom)
                                                                   else [alias.name for alias in node.names]))]
    errors = [str(path.relative_to(PLUGINS)) for path in outside
              if re.search(r"\bpg_errors\b|\bpsycopg\.(errors|Error|OperationalError|DatabaseError)\b",
                           path.read_text(encoding="utf-8"))]
    assert (direct, errors) == ([], [])


def test_no_module_utils_file_imports_ansible_core():
    """Not AnsibleModule, nor anything else of ansible-core: the module_utils' unit tests then say the same on every
    core, and run on one core per Python (hack/test.sh, step_units)."""
    importing = [str(path.relative_to(PLUGINS)) for path in SOURCES if path.relative_to(PLUGINS).parts[0] == "module_utils"
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ansible"
                 or isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "ansible" for alias in node.names)]
    assert importing == []


def test_contributing_draws_every_package_and_top_level_file():
    text = (COLLECTION / "CONTRIBUTING.md").read_text(encoding="utf-8")
    tree = text.split("## Where code lives", 1)[1].split("```", 2)[1]
    drawn = set()
    folder = ""
    for line in tree.splitlines():
        name = re.match(r"^\s*(\S+?)(/|\.py)?\s", line + " ")
        if not name or name.group(1) in ("plugins",):
            continue
        if line.startswith("  ") and not line.startswith("    "):
            folder = name.group(1)
        elif line.startswith("    ") and folder in ("module_utils", "plugin_utils"):
            drawn.add(f"{folder}/{name.group(1)}")
    assert drawn == ROW.keys()


def top_level_names(path: Path) -> set[str]:
    """What ``module.name`` may name in a module: its functions, classes, assignments and imports."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(target.id for target in getattr(node, "targets", [getattr(node, "target", None)])
                         if isinstance(target, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def test_every_module_a_docstring_or_comment_names_holds_that_name():
    """``ledger.owner`` in prose must be ledger.py's ``owner``: a rename leaves no dead name behind. A parameter of the
    file (``request.shards``) is not a module's name."""
    files = sorted(PLUGINS.rglob("*.py"))
    held: dict[str, set[str]] = {}
    for path in files:
        if path.stem == "__init__":  # a package holds its files' names too
            held.setdefault(path.parent.name, set()).update(top_level_names(path),
                                                            (child.stem for child in path.parent.glob("*.py")))
        else:
            held.setdefault(path.stem, set()).update(top_level_names(path))
    dead = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parameters = {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
        prose = [ast.get_docstring(node) or "" for node in ast.walk(tree)
                 if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))]
        with path.open(encoding="utf-8") as source:
            prose += [token.string for token in tokenize.generate_tokens(source.readline) if token.type == tokenize.COMMENT]
        for line in "\n".join(prose).splitlines():
            for module, name in re.findall(r"\b([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)", line):
                if module in held and module not in parameters and name not in held[module] | {"py", "md", "yml", "sh"}:
                    dead.append(f"{path.relative_to(PLUGINS)}: {module}.{name}")
    assert dead == [], "\n".join(dead)
