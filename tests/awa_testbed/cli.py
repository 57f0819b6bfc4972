"""``python -m awa_testbed``: start and stop test environments from the shell.

    up --state DIR [--major 18] [--apps 2] [--queue demo] [--handler-ms 0]
                        PostgreSQL + a least-privilege Awa database + N Awa
                        applications under supervisord; writes DIR/state.json
    quick-start --state DIR
                        what README.md's quick start assumes (database awa,
                        queue orders, role awa_runtime, awa-app-1 and
                        awa-app-2 under supervisord); prints the export lines
                        for libpq and a PATH with its supervisorctl
    status --state DIR [--settled SECONDS [--wait SECONDS]]
                        programs, live runtimes, the queue's shard count, jobs
    enqueue --state DIR --count N [--failing] [--max-attempts M]
                        enqueue N jobs into the queue at once (a backlog);
                        --failing: jobs the workers fail on purpose
    fault --state DIR PROGRAM {hang,crash,none}
                        the fault PROGRAM shows at its next start
                        (awa_testbed.worker --fault-file); none removes it
    deadlock --state DIR
                        two sessions deadlock on purpose (one more in
                        pg_stat_database.deadlocks)
    down --state DIR    stop and delete everything ``up`` made
    hosts-up --state DIR --host NAME[:bullseye] [--host ...]
                        boot producer hosts (Debian 12, or 11 with :bullseye;
                        systemd, sshd) with systemd-nspawn; writes
                        DIR/hosts.json and DIR/ssh_config
    hosts-down --state DIR
                        power the hosts off and delete their layers
    host-off --state DIR NAME
                        cut one host's power (it vanishes mid-rollout)
    host-on --state DIR NAME
                        boot that host again, as it was
    rootfs              build (or find) the hosts' cached root filesystem
    reap [--run ID]     stop every detached server/supervisord the test bed
                        registered (for one run id, or all of them)

The role's status command for the test bed is ``python -m awa_testbed.started``
(awa_testbed/started.py), apart from this command line so that it starts fast.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from . import deadlock, environment, hosts, lifecycle, producer, quick_start, rootfs
from .jobs import FAILING_TAG_PREFIX
from .status import status


def reap(run_id: str | None) -> int:
    """Stop registered detached processes and delete their folders."""
    stopped = 0
    # The servers last: the programs of a supervisord whose database is gone cannot shut down (20 s each, then SIGKILL).
    for path, record in sorted(lifecycle.registered(run_id), key=lambda registered: registered[1]["kind"] == "pg"):
        pid = record.get("pid")
        if pid and lifecycle.pid_alive(pid):
            # postmaster: SIGINT is a fast shutdown; supervisord: SIGTERM stops its children;
            # host (systemd-nspawn): SIGTERM powers the container off.
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
    starter.add_argument("--apps", type=int, default=2, help="Awa applications (runtime + producer) to run under supervisord (0: none)")
    starter.add_argument("--queue", default="demo")
    starter.add_argument("--produce-rate", type=float, default=5.0, help="jobs per second per application")
    starter.add_argument("--handler-ms", type=int, default=0, help="time each job takes in the workers")
    readme = commands.add_parser("quick-start", help="what README.md's quick start assumes; prints its export lines")
    readme.add_argument("--state", type=Path, required=True, help="folder for state.json, logs and sockets")
    reporter = commands.add_parser("status", help="what the installation is doing")
    reporter.add_argument("--state", type=Path, required=True)
    reporter.add_argument("--settled", type=float, help="also check the jobs enqueued more than this many seconds ago")
    reporter.add_argument("--wait", type=float, default=0, help="with --settled: seconds to let a backlog finish")
    burst = commands.add_parser("enqueue", help="enqueue jobs into the queue at once")
    burst.add_argument("--state", type=Path, required=True)
    burst.add_argument("--count", type=int, required=True)
    burst.add_argument("--failing", action="store_true", help="jobs the test bed's workers fail on purpose")
    burst.add_argument("--max-attempts", type=int, default=25, help="attempts Awa makes per job")
    breaker = commands.add_parser("fault", help="the fault a program shows at its next start")
    breaker.add_argument("--state", type=Path, required=True)
    breaker.add_argument("program")
    breaker.add_argument("fault", choices=("hang", "crash", "none"))
    locker = commands.add_parser("deadlock", help="two sessions deadlock on purpose")
    locker.add_argument("--state", type=Path, required=True)
    stopper = commands.add_parser("down", help="stop and delete what up started")
    stopper.add_argument("--state", type=Path, required=True)
    booter = commands.add_parser("hosts-up", help="boot producer hosts that outlive this command")
    booter.add_argument("--state", type=Path, required=True, help="folder for hosts.json, keys and host layers")
    booter.add_argument("--host", action="append", required=True,
                        help="inventory name of a host (NAME:bullseye: Debian 11), repeatable")
    halter = commands.add_parser("hosts-down", help="power off what hosts-up booted")
    halter.add_argument("--state", type=Path, required=True)
    for name, text in (("host-off", "cut one host's power"), ("host-on", "boot one host again")):
        switch = commands.add_parser(name, help=text)
        switch.add_argument("--state", type=Path, required=True)
        switch.add_argument("host")
    commands.add_parser("rootfs", help="build the producer hosts' root filesystems once (cached)")
    reaper = commands.add_parser("reap", help="stop detached processes left by a run")
    reaper.add_argument("--run", help="only this run id (default: every registered process)")
    return parser


def enqueue(state_dir: Path, count: int, failing: bool = False, max_attempts: int = 25) -> int:
    """A real producer (as the runtime role) enqueues ``count`` jobs as fast as it can, over 8 connections."""
    state = environment.load_state(state_dir)
    name = f"{FAILING_TAG_PREFIX if failing else ''}burst-{os.getpid()}"
    return producer.main(["--url", state["runtime_url"], "--record-dsn", state["superuser_dsn"],
                          "--queue", state["queue"], "--count", str(count), "--rate", "0",
                          "--concurrency", "8", "--connections", "8", "--name", name,
                          "--max-attempts", str(max_attempts)])


def hosts_command(args: argparse.Namespace) -> int:
    """hosts-up, hosts-down, rootfs: a message, not a traceback, when this machine cannot run the hosts."""
    try:
        if args.command == "host-off":
            hosts.power_off(args.state, args.host)
        elif args.command == "host-on":
            hosts.power_on(args.state, args.host)
        elif args.command == "hosts-up":
            booted = hosts.up(args.state, args.host)
            print(f"hosts {', '.join(booted['hosts'])} booted in {booted['boot_seconds']}s; "
                  f"ssh -F {booted['ssh_config']} NAME")
        elif args.command == "hosts-down":
            hosts.down(args.state)
        else:
            for release in rootfs.RELEASES.values():
                print(rootfs.ensure_rootfs(release))
    except (rootfs.RootfsError, hosts.HostError) as error:
        print(f"python -m awa_testbed {args.command}: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        state = environment.up(args.state, args.major, args.apps, args.queue, args.produce_rate,
                               handler_ms=args.handler_ms)
        print(f"PostgreSQL {state['major']} on port {state['server']['port']}, database {state['database']}, "
              f"applications {', '.join(state['programs'])}; state in {args.state}/state.json")
        return 0
    if args.command == "quick-start":
        print("\n".join(quick_start.up(args.state)))
        return 0
    if args.command == "status":
        print("\n".join(status(args.state, args.settled, args.wait)))
        return 0
    if args.command == "enqueue":
        return enqueue(args.state, args.count, args.failing, args.max_attempts)
    if args.command == "fault":
        environment.set_fault(args.state, args.program, args.fault)
        return 0
    if args.command == "deadlock":
        deadlock.deadlock_once(environment.load_state(args.state)["superuser_dsn"])
        return 0
    if args.command == "down":
        environment.down(args.state)
        return 0
    if args.command in ("hosts-up", "hosts-down", "host-off", "host-on", "rootfs"):
        return hosts_command(args)
    if args.command == "reap":
        return reap(args.run)
    raise AssertionError(args.command)
