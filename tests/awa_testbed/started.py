"""``python -m awa_testbed.started --state DIR [--pid] PROGRAM``: the test bed's restart-contract status command.

Prints when PROGRAM's current process started, as unix seconds, and with
``--pid`` its pid. Otherwise it exits as the restart contract asks (an init
script's status action, and ``supervisorctl status``): 3 when the program
does not run, 4 when supervisord has no such program, 1 when supervisord does
not answer. The role runs it for every service on every read of how the
services run, so it imports only the supervisor client and psutil, not the
test bed's servers (a third of a second less CPU a call than ``python -m
awa_testbed``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import psutil

from .supervisor import NoSuchProgram, Supervisor

NOT_RUNNING, NO_SUCH_SERVICE = 3, 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m awa_testbed.started", description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, required=True, help="the test bed's state folder")
    parser.add_argument("--pid", action="store_true", help="print the process's pid after its start")
    parser.add_argument("program")
    args = parser.parse_args(argv)
    try:
        info = Supervisor(args.state).program_info(args.program)
    except NoSuchProgram:
        print(f"{args.program}: ERROR (no such process)", file=sys.stderr)
        return NO_SUCH_SERVICE
    if info is None:
        print(f"supervisord of {args.state} does not answer", file=sys.stderr)
        return 1
    if not info["pid"]:
        print(f"{args.program} is not running ({info['statename']})", file=sys.stderr)
        return NOT_RUNNING
    pid = info["pid"]
    print(f"{psutil.Process(pid).create_time():.3f}" + (f" {pid}" if args.pid else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
