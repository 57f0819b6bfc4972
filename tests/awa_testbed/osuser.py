"""The unprivileged OS user that runs PostgreSQL when the test bed runs as root.

PostgreSQL refuses to run as root. As root we create a system user once and
run initdb/postgres as that user; as any other user we simply run as ourselves.

The first run on a machine may create the user from several processes at
once (``pytest -n 2``: each worker starts its own servers). Two ``useradd``
runs at the same moment can both succeed here, with two different uids, and
the second rewrite of /etc/passwd drops the first one's entry: that worker's
initdb then runs as a uid without a user and exits 1. So the user is created
under a lock that every test-bed process takes, and looked up again under it.
"""

from __future__ import annotations

import fcntl
import grp
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

DB_OS_USER = os.environ.get("AWA_TESTBED_OS_USER", "awa-testbed")
# One lock for the whole machine, whatever TMPDIR a process has.
USERADD_LOCK = Path("/run/lock" if os.path.isdir("/run/lock") else "/tmp") / "awa-testbed-useradd.lock"


@dataclass(frozen=True)
class OsIdentity:
    """Who the database server processes run as."""

    name: str
    uid: int
    gid: int

    @property
    def is_current_user(self) -> bool:
        return self.uid == os.geteuid()


def _created_user() -> pwd.struct_passwd | None:
    """The user and its group, if both are fully created (useradd writes /etc/passwd before /etc/group)."""
    try:
        entry = pwd.getpwnam(DB_OS_USER)
        grp.getgrgid(entry.pw_gid)
    except KeyError:
        return None
    return entry


def database_os_identity() -> OsIdentity:
    """Return the identity for server processes, creating the system user if needed."""
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return OsIdentity(entry.pw_name, entry.pw_uid, entry.pw_gid)
    entry = _created_user()
    if entry is None:
        with open(USERADD_LOCK, "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            entry = _created_user()
            if entry is None:
                created = subprocess.run(
                    ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                     "--shell", "/usr/sbin/nologin", DB_OS_USER],
                    check=False, capture_output=True, text=True,
                )
                entry = _created_user()
                if entry is None:
                    raise RuntimeError(f"could not create the OS user {DB_OS_USER} that runs PostgreSQL: "
                                       f"useradd exited {created.returncode}: {created.stderr.strip()}")
    return OsIdentity(entry.pw_name, entry.pw_uid, entry.pw_gid)


def run_as_kwargs(identity: OsIdentity) -> dict:
    """subprocess keyword arguments that drop to ``identity`` when we are root."""
    if identity.is_current_user:
        return {}
    return {"user": identity.uid, "group": identity.gid, "extra_groups": []}
