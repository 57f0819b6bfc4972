"""A real Awa worker runtime (awa-pg) as its own OS process.

    python -m awa_testbed.worker --url URL --queue orders=4 [--queue other=1]
        [--stripes N] [--name w1] [--handler-ms 0] [--env-file PATH]
        [--produce QUEUE --produce-rate 5] [--no-runtime] [--latency-summary PATH] [--log-env NAME]
        [--fault-file PATH]

Every job it runs is recorded in ``testbed.completions`` (tag, job id, worker,
pid). With ``--latency-summary`` it records nothing in the database (that
would be one commit per job) and instead writes each job's ``created_at``
and the moment its handler ended, as JSON, when it stops. SIGTERM or SIGINT
shut the runtime down gracefully, so its ``awa.runtime_instances`` row ends
with ``shutting_down = true``.

``--env-file`` puts KEY=VALUE lines into the environment before the runtime
starts, the way systemd's EnvironmentFile= does, as seen from outside too:
when the file sets a variable the environment lacks or holds another value
of, the process executes itself again (same argv, same pid) with them, so
``/proc/PID/environ`` shows them as it shows a unit's (the collection reads
``HOSTNAME`` there). ``--log-env NAME`` prints the variable's value (JSON) at
start, so a service's log shows which environment a process started with.
``--produce`` also runs a producer in the same process: an application that
enqueues and works; with ``--no-runtime`` it only enqueues (no Awa runtime,
so no ``awa.runtime_instances`` row).

Jobs whose tag starts with ``fail-`` raise in the handler (Awa retries them
until their ``max_attempts``, then marks them failed), for the rollout's
health gates. ``--fault-file PATH`` injects a fault the way a bad deployment
shows one: when PATH exists at start and says ``hang``, the process runs but
never starts its runtime (it waits for SIGTERM); ``crash``, it exits with
status 1 after three seconds without starting it (under a service manager
that restarts it, a restart loop). Removing the file removes the fault for
the next start.

``AWA_TESTBED_ROTATE_MS=LEASE,QUEUE`` starts the runtime with those queue
storage rotation intervals instead of Awa's (250 ms for leases, 1000 ms for
the ready queue): the functional tests set it (tests/functional/conftest.py)
and so does the molecule fleet's unit, because an idle runtime's rotations
are most of what its database does. Nothing this collection reads depends on
them: ready depth and lag come from the lanes' sequences, not from rows
rotation prunes.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import sys
import time
from array import array
from pathlib import Path

import awa
import psycopg

from . import producer
from .jobs import FAILING_TAG_PREFIX, KIND, TestJob

# Seconds a "crash" fault lets the process run: longer than supervisord's startsecs (2), so it counts as started.
CRASH_AFTER_SECONDS = 3.0


def parse_queue(text: str) -> tuple[str, int]:
    name, separator, workers = text.rpartition("=")
    if not separator:
        return text, 4
    return name, int(workers)


ROTATE_VARIABLE = "AWA_TESTBED_ROTATE_MS"


def rotation_intervals(value: str | None) -> dict[str, int]:
    """The start() arguments ``AWA_TESTBED_ROTATE_MS`` asks for (nothing when unset: Awa's own intervals)."""
    if not value:
        return {}
    try:
        lease, queue = (int(part) for part in value.split(","))
    except ValueError:
        raise SystemExit(f"{ROTATE_VARIABLE}={value!r}: expected LEASE_MS,QUEUE_MS, for example 2000,5000") from None
    return {"queue_storage_lease_rotate_interval_ms": lease, "queue_storage_queue_rotate_interval_ms": queue}


def read_env_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines (``#`` comments, optional quotes); nothing when the file does not exist."""
    loaded: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return loaded
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip():
            loaded[key.strip()] = value.strip().strip("'\"")
    return loaded


def load_env_file(path: str, name: str, execute_again: bool) -> dict[str, str]:
    """The file's variables in this process's environment, as a unit's EnvironmentFile= puts them there (before the
    process starts): with ``execute_again``, a file that sets a variable the environment lacks or holds another value
    of makes the process execute itself again (same argv, same pid) with them, where ``/proc/PID/environ`` shows them;
    without (main() called with arguments, in a program of its caller's), they only go into os.environ."""
    loaded = read_env_file(path)
    differing = sorted(key for key, value in loaded.items() if os.environ.get(key) != value)
    if differing and execute_again:
        # Names only: the values may be secrets.
        print(f"worker {name} pid={os.getpid()} executes again with {differing} of {path}", flush=True)
        os.execve(sys.executable, sys.orig_argv, {**os.environ, **loaded})
    os.environ.update(loaded)
    return loaded


async def run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    recorder = await psycopg.AsyncConnection.connect(args.record_dsn or args.url, autocommit=True)
    record_lock = asyncio.Lock()
    client = None if args.no_runtime else awa.AsyncClient(args.url, max_connections=args.connections)
    queues = [parse_queue(q) for q in args.queue]

    created, handled = array("d"), array("d")

    async def handle(job):
        tag = getattr(job.args, "tag", None) or ""
        if tag.startswith(FAILING_TAG_PREFIX):
            raise RuntimeError(f"test bed job {tag} fails on purpose")
        if args.handler_ms:
            await asyncio.sleep(args.handler_ms / 1000)
        if args.latency_summary:
            created.append(datetime.datetime.fromisoformat(job.created_at).timestamp())
            handled.append(time.time())
            return
        async with record_lock:
            # The job's ready row still exists while it runs; queue storage prunes it
            # later, so the shard it was enqueued on is recorded now.
            await recorder.execute(
                "INSERT INTO testbed.completions (tag, job_id, queue, enqueue_shard, worker, pid) "
                "VALUES (%s, %s, %s, (SELECT enqueue_shard FROM awa.ready_entries WHERE job_id = %s LIMIT 1), %s, %s)",
                (getattr(job.args, "tag", None), job.id, job.queue, job.id, args.name, os.getpid()))

    if client is None:
        print(f"worker {args.name} pid={os.getpid()} started without a runtime", flush=True)
    else:
        for queue, dummy in queues:
            client.task(TestJob, queue=queue, kind=KIND)(handle)
        await client.start(queues, poll_interval_ms=args.poll_ms, queue_storage_queue_stripe_count=args.stripes,
                           **args.rotation)
        print(f"worker {args.name} pid={os.getpid()} started queues={queues} stripes={args.stripes}", flush=True)

    production = None
    if args.produce:
        producer_args = producer.build_parser().parse_args([
            "--url", args.url, "--queue", args.produce, "--rate", str(args.produce_rate),
            "--name", f"{args.name}-{os.getpid()}", "--connections", "2",
            *(["--record-dsn", args.record_dsn] if args.record_dsn else [])])
        production = asyncio.create_task(producer.Producer(producer_args).run(stop))

    if args.ready_file:
        Path(args.ready_file).write_text(str(os.getpid()), encoding="utf-8")
    await stop.wait()
    print(f"worker {args.name} shutting down", flush=True)
    if production is not None:
        await production
    if client is not None:
        await client.shutdown(timeout_ms=5000)
        await client.close()
    await recorder.close()
    if args.latency_summary:
        Path(args.latency_summary).write_text(json.dumps(
            {"name": args.name, "created_at": created.tolist(), "handled_at": handled.tolist()}), encoding="utf-8")
    return 0


def injected_fault(path: str | None) -> str | None:
    """``hang`` or ``crash`` when the fault file says so; None when there is none."""
    if not path:
        return None
    try:
        fault = Path(path).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if fault not in ("hang", "crash"):
        raise SystemExit(f"{path}: a fault file says hang or crash, not {fault!r}")
    return fault


def act_out(fault: str, name: str) -> int:
    """The process of a broken deployment: it never starts its Awa runtime."""
    print(f"worker {name} pid={os.getpid()} fault {fault}: the runtime is not started", flush=True)
    if fault == "crash":
        time.sleep(CRASH_AFTER_SECONDS)
        return 1
    stopped = []
    signal.signal(signal.SIGTERM, lambda *dummy: stopped.append(True))
    while not stopped:
        time.sleep(0.2)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("AWA_DATABASE_URL"),
                        help="postgres:// URL the runtime connects with (default: $AWA_DATABASE_URL)")
    parser.add_argument("--record-dsn", help="where completions are recorded (default: --url)")
    parser.add_argument("--queue", action="append", default=[],
                        help="QUEUE[=WORKERS] the runtime serves, repeatable (required unless --no-runtime)")
    parser.add_argument("--stripes", type=int, default=1, help="queue_storage_queue_stripe_count")
    parser.add_argument("--name", default=f"worker-{os.getpid()}")
    parser.add_argument("--handler-ms", type=int, default=0, help="time each job takes")
    parser.add_argument("--poll-ms", type=int, default=200)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--env-file", help="KEY=VALUE file put into the environment first (the process executes "
                                           "itself again with the variables it sets)")
    parser.add_argument("--produce", metavar="QUEUE", help="also enqueue into QUEUE from this process")
    parser.add_argument("--produce-rate", type=float, default=5.0, help="jobs per second for --produce")
    parser.add_argument("--no-runtime", action="store_true",
                        help="start no Awa runtime: only enqueue, with --produce (an application that enqueues only)")
    parser.add_argument("--latency-summary", metavar="PATH",
                        help="record no completions; write every job's created_at and handler end here on exit")
    parser.add_argument("--log-env", action="append", default=[], metavar="NAME",
                        help="print this environment variable at start, repeatable")
    parser.add_argument("--fault-file", help="hang or crash at start when this file says so")
    parser.add_argument("--ready-file")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url or AWA_DATABASE_URL is required")
    if not args.queue and not args.no_runtime:
        parser.error("--queue is required (unless --no-runtime)")
    if args.no_runtime and not args.produce:
        parser.error("--no-runtime needs --produce: a worker without a runtime only enqueues")
    if args.env_file:
        # Only the process that runs the worker as its program executes itself again; main([...]) in another never.
        loaded = load_env_file(args.env_file, args.name, execute_again=argv is None)
        print(f"worker {args.name} environment from {args.env_file}: {sorted(loaded.items())}", flush=True)
    if args.log_env:
        started_with = {name: os.environ.get(name) for name in args.log_env}
        print(f"worker {args.name} pid={os.getpid()} environment {json.dumps(started_with, sort_keys=True)}", flush=True)
    # Read before anything connects: a bad value stops the program with its message, nothing started.
    args.rotation = rotation_intervals(os.environ.get(ROTATE_VARIABLE))
    fault = injected_fault(args.fault_file)
    if fault:
        return act_out(fault, args.name)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
