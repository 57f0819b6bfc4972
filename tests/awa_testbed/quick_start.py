"""What README.md's quick start assumes, on this machine (``bash hack/quick-start-bed.sh up``).

The quick start changes queue ``orders`` in a database ``awa`` whose roles are
those of Awa's security guide (``awa_migrator`` makes the change, the
applications log in as members of ``awa_runtime``), while two Awa
applications, ``awa-app-1`` and ``awa-app-2``, run under supervisord on this
machine and ``supervisorctl`` restarts them. ``up`` brings exactly that up
(the test bed's ``environment.up``, plus the role ``awa_runtime`` and a
folder with a ``supervisorctl`` for PATH) and returns the shell lines that
point libpq and PATH at it; ``environment.down`` removes it all.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from psycopg import sql

from . import environment

DATABASE = "awa"
QUEUE = "orders"
APPLICATIONS = 2
RUNTIME_ROLE = "awa_runtime"


def _grant_runtime_role(state: dict) -> None:
    """The role the quick start's inventory names, of which the applications' login role and the migrator are members."""
    with environment.database(state).connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(RUNTIME_ROLE)))
        for member in (*state["runtime_roles"], state["migrator"]):
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(RUNTIME_ROLE), sql.Identifier(member)))


def _supervisorctl_folder(state: dict) -> Path:
    """A folder holding ``supervisorctl`` for this bed's supervisord, as an installed supervisord's would be on PATH."""
    folder = Path(state["state_dir"]) / "bin"
    folder.mkdir(exist_ok=True)
    program = folder / "supervisorctl"
    program.write_text("#!/bin/sh\nexec " + shlex.join(state["supervisorctl"]) + ' "$@"\n', encoding="utf-8")
    program.chmod(0o755)
    return folder


def exports(state_dir: Path) -> list[str]:
    """The shell lines that point libpq at the bed's database and PATH at its supervisorctl."""
    state = environment.load_state(state_dir)
    login = state["login"]
    return [f"export PGHOST={shlex.quote(login['login_host'])} PGPORT={login['login_port']} "
            f"PGPASSWORD={shlex.quote(login['login_password'])}",
            f'export PATH={shlex.quote(str(Path(state_dir) / "bin"))}:"$PATH"']


def up(state_dir: Path) -> list[str]:
    """Start what the quick start assumes (a bed already up is left as it is); return its ``exports``."""
    if not (state_dir / "state.json").exists():
        try:
            state = environment.up(state_dir, major=18, apps=APPLICATIONS, queue=QUEUE, database=DATABASE)
            _grant_runtime_role(state)
            _supervisorctl_folder(state)
        except BaseException:
            environment.down(state_dir)  # nothing half made is left running
            raise
    return exports(state_dir)
