# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a service's processes report to Awa as their runtime's identity: a pid and a host name.

An Awa 0.6.9 runtime reports ``std::process::id()`` - its pid in its own pid
namespace (1 in a container) - and the ``HOSTNAME`` variable of its
environment (none under systemd or supervisord unless its environment file
sets it; a container's id under Docker and Podman). Read here, on the host,
from every process of the service: a systemd unit's control group (a
container whose processes stay in it, as Quadlet's do, included) or the
process a status command names and its descendants. ``/proc/PID/status``
(``NSpid:``) gives each process's pid in its innermost namespace;
``/proc/PID/environ`` its environment as it started, which only the
process's user and root may read - where it cannot be read, the identity
carries no ``hostname`` key: any host name.
"""

from __future__ import annotations

import os
from typing import Any


def read(path: str) -> bytes | None:
    """A file's bytes; None when it cannot be read (a process that is gone, a file only another user may read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def children(root: str = "/") -> dict[int, list[int]]:
    """Each process's children, from one pass over /proc (each process's parent)."""
    found: dict[int, list[int]] = {}
    for name in os.listdir(os.path.join(root, "proc")):
        stat = read(os.path.join(root, "proc", name, "stat")) if name.isdigit() else None
        if stat:
            # The command name in parentheses may hold spaces: the parent is the second field after it.
            found.setdefault(int(stat[stat.rindex(b")") + 2:].split()[1]), []).append(int(name))
    return found


def descendants(pid: int, below: dict[int, list[int]]) -> list[int]:
    """``pid`` and every process below it (``below``: children())."""
    found = [pid]
    for parent in found:
        found += [child for child in below.get(parent, []) if child not in found]
    return found


def cgroup_pids(cgroup: str, root: str = "/") -> list[int]:
    """Every process of a control group and of the groups below it, under cgroup v2 or v1 (systemd's hierarchy)."""
    for base in ("sys/fs/cgroup", "sys/fs/cgroup/systemd", "sys/fs/cgroup/unified"):
        top = os.path.join(root, base, cgroup.lstrip("/"))
        if cgroup and os.path.isfile(os.path.join(top, "cgroup.procs")):
            return [int(line) for folder, dummy, files in os.walk(top) if "cgroup.procs" in files
                    for line in (read(os.path.join(folder, "cgroup.procs")) or b"").split() if line.isdigit()]
    return []


def reports_as(main_pid: int | None, cgroup: str, below: dict[int, list[int]], root: str = "/") -> list[dict[str, Any]]:
    """The pid and host name each process of a running service would report as an Awa runtime, each once, in order:
    the processes of its control group ``cgroup``, else ``main_pid`` and its descendants (``below``: children()). A
    process that is gone reports nothing; one whose environment cannot be read, no ``hostname``."""
    found: list[dict[str, Any]] = []
    for pid in cgroup_pids(cgroup, root) or (descendants(main_pid, below) if main_pid else []):
        status = read(os.path.join(root, "proc", str(pid), "status"))
        if status is None:
            continue
        nspid = [line.split()[1:] for line in status.decode("utf-8", "replace").splitlines() if line.startswith("NSpid:")]
        known: dict[str, Any] = {"pid": int(nspid[0][-1]) if nspid and nspid[0] else pid}
        environ = read(os.path.join(root, "proc", str(pid), "environ"))
        if environ is not None:
            known["hostname"] = next((entry[len(b"HOSTNAME="):].decode("utf-8", "replace")
                                      for entry in environ.split(b"\0") if entry.startswith(b"HOSTNAME=")), None)
        if known not in found:
            found.append(known)
    return found
