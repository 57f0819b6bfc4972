"""``python -m awa_testbed``: start and stop test environments from the shell.

    up --state DIR [--major 18] [--apps 2] [--queue demo] [--handler-ms 0]
                        PostgreSQL + a least-privilege Awa database + N Awa
                        applications under supervisord; writes DIR/state.json
    status --state DIR [--settled SECONDS [--wait SECONDS]]
                        programs, live runtimes, the queue's shard count, jobs
    enqueue --state DIR --count N
                        enqueue N jobs into the queue at once (a backlog)
    started --state DIR PROGRAM
                        when PROGRAM's current process started, as unix
                        seconds (the role's enqueue_shards_status_command)
    down --state DIR    stop and delete everything ``up`` made
    reap [--run ID]     stop every detached server/supervisord the test bed
                        registered (for one run id, or all of them)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys

from pathlib import Path

import psutil

from . import environment, lifecycle, producer
from .status import status
from .supervisor import Supervisor


def reap(run_id: str | None) -> int:
    """Stop registered detached processes and delete their folders."""
    stopped = 0
    for path, record in lifecycle.registered(run_id):
        pid = record.get("pid")
        if pid and lifecycle.pid_alive(pid):
            # postmaster: SIGINT is a fast shutdown; supervisord: SIGTERM stops its children.
            first = signal.SIGINT if record["kind"] == "pg" else signal.SIGTERM
            lifecycle.terminate_pid(pid, first, timeout=30)
            stopped += 1
        folder = record.get("base_dir")
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        path.unlink(missing_ok=True)
    print(f"reaped {stopped} process(es)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m awa_testbed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    starter = commands.add_parser("up", help="start an Awa installation that outlives this command")
    starter.add_argument("--state", type=Path, required=True, help="folder for state.json, logs and sockets")
    starter.add_argument("--major", type=int, default=18, choices=(17, 18))
    starter.add_argument("--apps", type=int, default=2, help="Awa applications (runtime + producer) to run")
    starter.add_argument("--queue", default="demo")
    starter.add_argument("--produce-rate", type=float, default=5.0, help="jobs per second per application")
    starter.add_argument("--handler-ms", type=int, default=0, help="time each job takes in the workers")
    reporter = commands.add_parser("status", help="what the installation is doing")
    reporter.add_argument("--state", type=Path, required=True)
    reporter.add_argument("--settled", type=float, help="also check the jobs enqueued more than this many seconds ago")
    reporter.add_argument("--wait", type=float, default=0, help="with --settled: seconds to let a backlog finish")
    burst = commands.add_parser("enqueue", help="enqueue jobs into the queue at once")
    burst.add_argument("--state", type=Path, required=True)
    burst.add_argument("--count", type=int, required=True)
    starter_time = commands.add_parser("started", help="when a program's current process started (unix seconds)")
    starter_time.add_argument("--state", type=Path, required=True)
    starter_time.add_argument("program")
    stopper = commands.add_parser("down", help="stop and delete what up started")
    stopper.add_argument("--state", type=Path, required=True)
    reaper = commands.add_parser("reap", help="stop detached processes left by a run")
    reaper.add_argument("--run", help="only this run id (default: every registered process)")
    return parser


def enqueue(state_dir: Path, count: int) -> int:
    """A real producer (as the runtime role) enqueues ``count`` jobs as fast as it can, over 8 connections."""
    state = environment.load_state(state_dir)
    return producer.main(["--url", state["runtime_url"], "--record-dsn", state["superuser_dsn"],
                          "--queue", state["queue"], "--count", str(count), "--rate", "0",
                          "--concurrency", "8", "--connections", "8", "--name", f"burst-{os.getpid()}"])


def started(state_dir: Path, program: str) -> int:
    """Print when ``program``'s process started; exit 1 when it does not run."""
    pid = Supervisor(state_dir).program_pid(program)
    if pid is None:
        print(f"{program} is not running", file=sys.stderr)
        return 1
    print(f"{psutil.Process(pid).create_time():.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        state = environment.up(args.state, args.major, args.apps, args.queue, args.produce_rate,
                               handler_ms=args.handler_ms)
        print(f"PostgreSQL {state['major']} on port {state['server']['port']}, database {state['database']}, "
              f"applications {', '.join(state['programs'])}; state in {args.state}/state.json")
        return 0
    if args.command == "status":
        print("\n".join(status(args.state, args.settled, args.wait)))
        return 0
    if args.command == "enqueue":
        return enqueue(args.state, args.count)
    if args.command == "started":
        return started(args.state, args.program)
    if args.command == "down":
        environment.down(args.state)
        return 0
    if args.command == "reap":
        return reap(args.run)
    raise AssertionError(args.command)
