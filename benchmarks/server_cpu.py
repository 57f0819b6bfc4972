"""CPU seconds of a process and its children, from /proc: what a PostgreSQL server used over a run.

A server's work is spread over its backends, one process per session, most
of which end before the run does: the postmaster reaps each, and the kernel
adds its CPU to the postmaster's ``cutime``/``cstime``. So the server's CPU
so far is the postmaster's own and its reaped children's, plus the live
children's own; the difference of two readings is what the server used in
between, sessions opened and closed in between included. Linux only
(``/proc/PID/task/PID/children``). The fleet benchmark reads it between
runs (benchmarks/fleet.py) and its callback at every task start
(benchmarks/callback_plugins/bench_timer.py).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _stat_ticks(pid: int, reaped: bool) -> int:
    """utime + stime (and, with ``reaped``, cutime + cstime) of ``pid`` in clock ticks; 0 once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8")
    except OSError:
        return 0
    # Fields after "pid (comm) ": state, ppid, ... utime is the 14th field of the line, the 12th after the name.
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(value) for value in fields[11:15 if reaped else 13])


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in (PROC / str(pid) / "task" / str(pid) / "children").read_text().split()]
    except OSError:
        return []


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its reaped children so far, plus its live children's own (see the docstring)."""
    ticks = _stat_ticks(pid, reaped=True) + sum(_stat_ticks(child, reaped=True) for child in children(pid))
    return ticks / os.sysconf("SC_CLK_TCK")
