"""Run the benchmarks: ``bash benchmarks/run.sh [--quick] [--majors 17 18] [--suites ...]``.

For each PostgreSQL major it starts a durable server (fsync on), runs the
suites in order, prints one table per suite as soon as it is done, and writes
each suite's summary (what its tables and the charts read) to
benchmarks/results/<UTC timestamp>.json and everything measured to the
ignored benchmarks/raw/<UTC timestamp>.json.gz (both rewritten after each
suite, so an interrupted run keeps what it measured).
``--tables FILE.json`` prints the tables of an earlier run again (either file);
``python -m benchmarks charts`` draws the headline charts of docs/performance.md
from the newest run of each suite (benchmarks/charts.py).

Suites: change (cost of one change), impact (live producers), scale (many
queues, Ansible), convergence (restart pickup), and, only when named,
shard_choice (which S helps real producers: path x N x S; about 35 minutes:
``--suites shard_choice``), lost_commit (COMMITs cut by a proxy: is the
module's answer true, and how fast) and fleet (the change-window playbook
over SSH to N systemd hosts beside a floor; needs root and ``bash
hack/hosts.sh``: ``--suites fleet``) and fleet_light (the same on light hosts: inventory hosts on
a local connection whose services are real runtimes under supervisord, to measure the controller past 12
hosts: ``--suites fleet_light``) and batch_wait (one poll of the
rollout's batch wait at 1, 10 and 100 queues, with and without the lanes:
``--suites batch_wait``) and change_list (the module's change of 100 and 400
queues beside the floor's SQL in one transaction, in process: ``--suites
change_list``). It never passes or fails: it measures and reports.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from . import (batch_wait, change_cost, change_list, charts, convergence, environment, fleet, fleet_light,
               fleet_report, lost_commit, producer_impact, scale, shard_choice, shard_choice_report)
from .environment import BenchServer
from .fleet import FleetMatrix
from .producer_impact import Traffic
from .shard_choice import Matrix

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RAW_DIR = Path(__file__).resolve().parent / "raw"


@dataclass(frozen=True)
class Profile:
    """How much of everything one run measures."""

    name: str
    change_iterations: int
    impact_rounds: int
    scale_queues: int
    runtime_counts: tuple[int, ...]
    traffic: Traffic = field(default_factory=Traffic)
    shard_matrix: Matrix = field(default_factory=Matrix)
    lost_commit_rounds: int = 25
    fleet_matrix: FleetMatrix = field(default_factory=FleetMatrix)
    change_list_queues: tuple[int, ...] = change_list.QUEUE_COUNTS
    change_list_repeats: int = 7


FULL = Profile("full", change_iterations=7, impact_rounds=3, scale_queues=100, runtime_counts=(2, 8))
QUICK = Profile("quick", change_iterations=3, impact_rounds=1, scale_queues=20, runtime_counts=(2,),
                traffic=Traffic(warmup_seconds=3.0, after_seconds=4.0), shard_matrix=shard_choice.QUICK_MATRIX,
                lost_commit_rounds=5, fleet_matrix=fleet.QUICK_MATRIX, change_list_queues=(100,),
                change_list_repeats=3)


@dataclass(frozen=True)
class Suite:
    """How to run one suite for one server, how to show its result's summary, and what that summary keeps."""

    run: Callable[[BenchServer, Profile, Path], dict]
    table: Callable[[int, dict], str]
    summary: Callable[[dict], dict] = lambda result: result


SUITES: dict[str, Suite] = {
    "change": Suite(lambda bench, profile, work_dir: change_cost.run(bench, profile.change_iterations),
                    change_cost.table),
    "impact": Suite(lambda bench, profile, work_dir: producer_impact.run(
        bench, profile.traffic, profile.impact_rounds, work_dir), producer_impact.table, producer_impact.summary),
    "scale": Suite(lambda bench, profile, work_dir: scale.run(bench, profile.scale_queues, work_dir), scale.table),
    "convergence": Suite(lambda bench, profile, work_dir: convergence.run(bench, profile.runtime_counts, work_dir),
                         convergence.table),
    "shard_choice": Suite(lambda bench, profile, work_dir: shard_choice.run(bench, profile.shard_matrix, work_dir),
                          shard_choice.table, shard_choice_report.summary),
    "lost_commit": Suite(lambda bench, profile, work_dir: lost_commit.run(bench, profile.lost_commit_rounds),
                         lost_commit.table),
    "fleet": Suite(lambda bench, profile, work_dir: fleet.run(bench, profile.fleet_matrix, work_dir), fleet.table,
                   fleet_report.summary),
    "fleet_light": Suite(lambda bench, profile, work_dir: fleet_light.run(bench, profile.fleet_matrix, work_dir),
                         fleet_light.table, fleet_report.summary),
    "batch_wait": Suite(lambda bench, profile, work_dir: batch_wait.run(bench, work_dir), batch_wait.table),
    "change_list": Suite(lambda bench, profile, work_dir: change_list.run(
        bench, profile.change_list_queues, profile.change_list_repeats), change_list.table),
}
# Run when --suites is not given (shard_choice takes about 35 minutes on its own; lost_commit is about
# reliability, not cost; fleet needs root and hosts).
DEFAULT_SUITES = ("change", "impact", "scale", "convergence")


def summarize(report: dict) -> dict:
    """The report with each suite's result replaced by its summary (Suite.summary)."""
    return {**report, "results": {major: {name: {**measured, "result": SUITES[name].summary(measured["result"])}
                                          if "result" in measured else measured for name, measured in suites.items()}
                                  for major, suites in report["results"].items()}}


def write(report: dict, output: Path) -> None:
    """The summaries to ``output``, everything measured to RAW_DIR (which git ignores), compressed."""
    RAW_DIR.mkdir(exist_ok=True)
    (RAW_DIR / f"{output.stem}.json.gz").write_bytes(gzip.compress(json.dumps(report, default=str).encode("utf-8")))
    output.write_text(json.dumps({**summarize(report), "raw": f"benchmarks/raw/{output.stem}.json.gz"}, indent=1,
                                 default=str), encoding="utf-8")


def suite_tables(report: dict, suites: list[str] | None = None) -> str:
    """Every table of a report or its summary (or of ``suites`` only), major by major."""
    parts = []
    for major, measured_suites in summarize(report)["results"].items():
        for name, measured in measured_suites.items():
            if "result" in measured and (suites is None or name in suites):
                parts.append(SUITES[name].table(int(major), measured["result"]))
    return "\n".join(parts)


def measure(report: dict, output: Path, profile: Profile, majors: list[int], suites: list[str]) -> None:
    """Run ``suites`` on each major; the programs' logs stay in a temporary folder only if a suite fails."""
    work_dir = Path(tempfile.mkdtemp(prefix="awa-bench-"))
    for major in majors:
        with environment.durable_server(major) as bench:
            report["servers"][str(major)] = bench.settings()
            results = report["results"].setdefault(str(major), {})
            for name in suites:
                started, load_before = time.monotonic(), environment.load_average()
                result = SUITES[name].run(bench, profile, work_dir)
                results[name] = {"seconds": round(time.monotonic() - started, 1), "load_before": load_before,
                                 "load_after": environment.load_average(), "result": result}
                print(SUITES[name].table(major, SUITES[name].summary(result)), flush=True)
                print(f"(load average {load_before} -> {results[name]['load_after']})\n", flush=True)
                write(report, output)
    shutil.rmtree(work_dir, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations and queues (a few minutes)")
    parser.add_argument("--majors", type=int, nargs="+", default=[17, 18], choices=(17, 18))
    parser.add_argument("--suites", nargs="+", choices=SUITES,
                        help=f"default: {' '.join(DEFAULT_SUITES)} (with --tables: every suite in the file)")
    parser.add_argument("--output", type=Path, help="JSON file to write (default: benchmarks/results/<timestamp>.json)")
    parser.add_argument("--tables", type=Path, metavar="FILE.json", help="print the tables of an earlier run and exit")
    matrix = parser.add_argument_group("shard_choice matrix (defaults: the profile's)")
    matrix.add_argument("--producers", type=int, nargs="+", metavar="N", help="producer counts")
    matrix.add_argument("--shards", type=int, nargs="+", metavar="S", help="shard counts")
    matrix.add_argument("--paths", nargs="+", choices=shard_choice.PATHS, help="enqueue paths")
    matrix.add_argument("--repeats", type=int, help="windows per cell")
    matrix.add_argument("--window", type=float, metavar="SECONDS", help="length of each measured window")
    hosts = parser.add_argument_group("fleet matrix (defaults: the profile's)")
    hosts.add_argument("--fleet-hosts", type=int, nargs="+", metavar="N", help="producer host counts")
    hosts.add_argument("--fleet-queues", type=int, nargs="+", metavar="Q", help="queue counts on the fewest hosts")
    hosts.add_argument("--fleet-host-queues", type=int, nargs="+", metavar="Q",
                       help="queue counts on every host count (the fit over hosts)")
    hosts.add_argument("--fleet-units-per-host", type=int, metavar="UNITS", help="producer units on each host")
    hosts.add_argument("--fleet-produce-rate", type=float, metavar="JOBS",
                       help="jobs a second each unit enqueues (the unit's runtime has --fleet-workers workers)")
    hosts.add_argument("--fleet-workers", type=int, metavar="N", help="workers of each unit's runtime")
    hosts.add_argument("--fleet-configs", nargs="+", choices=fleet.CONFIGS, help="Ansible configurations")
    hosts.add_argument("--fleet-compare", nargs="*", choices=fleet.CONFIGS,
                       help="configurations also measured on the largest cell only (none: no comparison)")
    hosts.add_argument("--fleet-repeats", type=int, help="runs of the role and the floor per cell")
    hosts.add_argument("--fleet-batch-size", type=int, metavar="HOSTS",
                       help="hosts restarted at once, each with all of its units (enqueue_shards_batch_size; "
                            "default: half of them, two batches)")
    return parser


def _given(chosen: dict) -> dict:
    return {name: tuple(value) if isinstance(value, list) else value
            for name, value in chosen.items() if value is not None}


def with_matrix_options(profile: Profile, args: argparse.Namespace) -> Profile:
    """The profile with the shard_choice and fleet options given on the command line."""
    shard_changes = _given({"producers": args.producers, "shards": args.shards, "paths": args.paths,
                            "repeats": args.repeats, "window_seconds": args.window})
    fleet_changes = _given({"hosts": args.fleet_hosts, "queues": args.fleet_queues,
                            "host_queues": args.fleet_host_queues, "configs": args.fleet_configs,
                            "compare": args.fleet_compare, "repeats": args.fleet_repeats,
                            "batch_size": args.fleet_batch_size, "units_per_host": args.fleet_units_per_host,
                            "produce_rate": args.fleet_produce_rate, "workers": args.fleet_workers})
    return replace(profile, shard_matrix=replace(profile.shard_matrix, **shard_changes),
                   fleet_matrix=replace(profile.fleet_matrix, **fleet_changes))


def _interrupted(signum, frame):  # pylint: disable=unused-argument
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM unwinds like Ctrl-C, so every suite stops the servers and hosts it started.
    signal.signal(signal.SIGTERM, _interrupted)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["charts"]:
        return charts.main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.tables:
        with (gzip.open if args.tables.suffix == ".gz" else open)(args.tables, "rt", encoding="utf-8") as file:
            print(suite_tables(json.load(file), args.suites))
        return 0
    suites = args.suites or list(DEFAULT_SUITES)
    profile = with_matrix_options(QUICK if args.quick else FULL, args)
    problems = profile.shard_matrix.problems() + profile.fleet_matrix.problems()
    if problems:
        build_parser().error("; ".join(problems))
    started = datetime.datetime.now(datetime.timezone.utc)
    output = args.output or RESULTS_DIR / f"{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    report = {"started_at": started.isoformat(), "command": shlex.join([sys.argv[0], *sys.argv[1:]]),
              "profile": asdict(profile), "machine": environment.machine(), "servers": {}, "results": {}}
    print(f"awa.operations benchmarks ({profile.name}), PostgreSQL {', '.join(map(str, args.majors))}, "
          f"durable servers (fsync on); writing {output}\n", flush=True)
    measure(report, output, profile, args.majors, suites)
    report["finished_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    write(report, output)
    print(f"results: {output} (raw: {RAW_DIR / output.stem}.json.gz)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
