# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Nothing the collection sends to PostgreSQL outlives its transaction, which a transaction pooler needs.

Through PgBouncer in transaction pooling, the server connection goes to the
pool's next client when a transaction ends: a session setting, role, lock,
listener, temporary table, held cursor or prepared statement would go with it
(or be missing on the next server connection). Every SQL text of the
collection is a string constant in its Python, so each is read here; docstrings
are prose, not SQL. The behaviour itself is proven through a real PgBouncer in
tests/functional/test_pgbouncer.py; docs/enqueue_shards.md, "Behind a connection
pooler", lists the locks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

COLLECTION = Path(__file__).resolve().parents[4]
SOURCES = sorted([*(COLLECTION / "plugins").rglob("*.py"), *(COLLECTION / "extensions" / "eda").rglob("*.py")])

# Session-scoped SQL, and what to use instead. SQL keywords are written in capitals here (shared/style.md), which
# tells a SET statement from a message such as "Set ssl_key to ...".
SESSION_SCOPED = {
    r"(?i)\bpg_(try_)?advisory_lock(_shared)?\s*\(": "a session advisory lock: use pg_advisory_xact_lock",
    r"(^|;)\s*SET\s+(?!LOCAL\b)(ROLE|SESSION|\w+\s*(=|TO\b))":
        "a session setting: use SET LOCAL or set_config(..., true)",
    r"(?i)\bset_config\s*\([^)]*,\s*false\s*\)": "a session setting: use set_config(..., true)",
    r"(^|;)\s*(LISTEN|PREPARE|DISCARD|RESET)\b": "session state",
    r"(?i)\bWITH\s+HOLD\b": "a cursor that outlives its transaction",
    r"(?i)\bCREATE\s+(LOCAL\s+|GLOBAL\s+)?TEMP(ORARY)?\b": "a temporary table (session-scoped)",
}


def sql_texts(path: Path) -> list[str]:
    """Every string constant of ``path`` that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_sources_hold_the_sql_that_is_checked():
    texts = [text for path in SOURCES for text in sql_texts(path)]
    assert any("pg_advisory_xact_lock" in text for text in texts), "the queue lock's SQL was not found"
    assert any("set_config('lock_timeout'" in text for text in texts), "the transaction settings were not found"


@pytest.mark.parametrize("pattern, why", SESSION_SCOPED.items())
def test_no_sql_of_the_collection_is_session_scoped(pattern, why):
    found = [f"{path.relative_to(COLLECTION)}: {text.strip()[:120]!r}" for path in SOURCES for text in sql_texts(path)
             if re.search(pattern, text, re.MULTILINE)]
    assert found == [], f"{why}:\n" + "\n".join(found)


@pytest.mark.parametrize("text", [
    "SELECT pg_advisory_lock(hashtextextended('k', 0))",
    "SET ROLE awa_owner",
    "SET lock_timeout = '5s'",
    "SELECT 1; SET search_path TO awa",
    "SELECT set_config('role', 'awa_owner', false)",
    "LISTEN awa_changes",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "CREATE TEMP TABLE t (x int)",
])
def test_each_session_scoped_form_is_caught(text):
    assert any(re.search(pattern, text, re.MULTILINE) for pattern in SESSION_SCOPED)


@pytest.mark.parametrize("text", [
    "SELECT pg_advisory_xact_lock(hashtextextended('k', 0))",
    "SELECT set_config('lock_timeout', %(timeout)s, true), set_config('role', %(role)s, true)",
    "INSERT INTO awa.queue_meta (queue, enqueue_shards) VALUES ('q', 2) ON CONFLICT (queue) DO UPDATE SET "
    "enqueue_shards = EXCLUDED.enqueue_shards",
    "SET LOCAL lock_timeout = '5s'",
])
def test_transaction_scoped_forms_pass(text):
    assert not any(re.search(pattern, text, re.MULTILINE) for pattern in SESSION_SCOPED)
