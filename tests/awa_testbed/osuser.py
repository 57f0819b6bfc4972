"""The unprivileged OS user that runs PostgreSQL when the test bed runs as root.

PostgreSQL refuses to run as root. As root we create a system user once and
run initdb/postgres as that user; as any other user we simply run as ourselves.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass

DB_OS_USER = os.environ.get("AWA_TESTBED_OS_USER", "awa-testbed")


@dataclass(frozen=True)
class OsIdentity:
    """Who the database server processes run as."""

    name: str
    uid: int
    gid: int

    @property
    def is_current_user(self) -> bool:
        return self.uid == os.geteuid()


def database_os_identity() -> OsIdentity:
    """Return the identity for server processes, creating the system user if needed."""
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return OsIdentity(entry.pw_name, entry.pw_uid, entry.pw_gid)
    try:
        entry = pwd.getpwnam(DB_OS_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", DB_OS_USER],
            check=False, capture_output=True, text=True,
        )
        # A concurrent run may have created it first: look it up either way.
        entry = pwd.getpwnam(DB_OS_USER)
    return OsIdentity(entry.pw_name, entry.pw_uid, entry.pw_gid)


def run_as_kwargs(identity: OsIdentity) -> dict:
    """subprocess keyword arguments that drop to ``identity`` when we are root."""
    if identity.is_current_user:
        return {}
    return {"user": identity.uid, "group": identity.gid, "extra_groups": []}
