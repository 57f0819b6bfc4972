"""The fleet benchmark's tables (benchmarks/fleet.py measures): cells, phases, the fits over hosts, the targets
(benchmarks/fleet_scale.py adds the projection beyond the hosts measured).

Every table is computed from the result's summary (``summary``, drawn from
the callback's record), so ``--tables FILE.json`` prints them again for any
earlier run, the 0.2.0 runs included (their callback did not list runs by
host: benchmarks/fleet_timing.py counts those one per host that ended). A cell
is one host count, queue count and Ansible configuration, the role and the
floor run side by side on it.

A cell counts (for the fit and the targets) when both runs completed and
the machine was less than 0.8 busy during each: above that the numbers
measure the overload, not the playbook. The busy share is every process on
the machine, other users' too, so a cell can miss the mark on a shared
machine that the fleet alone would not fill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from . import fleet_model, fleet_timing, stats, tables

# The database controller's inventory name in the benchmark's inventory (benchmarks/fleet.py).
CONTROLLER = "awa-db"
SHOWN_PHASES = ("start-up", "validate", "preflight", "change", "producer config", "restart plan", "restarts",
                "batch waits", "batch checks", "final wait", "summary")
KINDS = ("role", "floor")
BUSY_LIMIT = 0.8
# The targets of issues 26 (section 5), 43 (section 2) and 57: reported against, whether met or not.
RATIO_LIMIT = 2.0
RUNS_PER_HOST, RUNS_FIXED = 10, 20
SLOPE_RATIO_LIMIT = 2.0
# A window's output must not grow with its queues: 100 queues print at most 20 lines more than 1 (on the same
# hosts). It grows with hosts by a line a host for each task that runs on every host, as Ansible prints them, and
# with batches by each batch's play and tasks: issue 57's target is fewer than 20 lines a host on 50 hosts (or more)
# with a batch a host (enqueue_shards_batch_size 1, the role's default).
QUEUE_LINES_LIMIT, QUEUE_LINES_CELLS = 20, (1, 100)
LINES_PER_HOST_LIMIT, LINES_TARGET_HOSTS = 20, 50
# Forks of a configuration a result does not record (the 0.2.0 runs): ansible.cfg's, or Ansible's default 5.
OLD_RUN_FORKS = {"pipelining+forks": 50}


def run_breakdown(run: dict) -> dict:
    """The run's breakdown, recomputed from the callback's record (in a raw result) with this checkout's rules."""
    record, stored = run.get("timings"), run.get("breakdown")
    if not record or not stored:
        return stored or {}
    ended = record.get("ended", 0.0) + stored["phases"]["exit"]
    return fleet_timing.breakdown(record, ended - run["wall_s"], ended, CONTROLLER, run.get("controller_cpu_s"))


def _phases(run: dict, key: str = "phases") -> dict:
    return run_breakdown(run).get(key) or {}


def cell_line(cell: dict) -> str:
    """The progress line of a measured cell."""
    role, floor = cell["role"], cell["floor"]
    return (f"  hosts {cell['hosts']}, queues {cell['queues']}, {cell['config']}: "
            + ", ".join(f"{kind} {run['wall_s']:.1f} s (rc {run['rc']}, {run.get('lines')} lines, busy "
                        f"{run['machine_busy']})" for kind, run in (("role", role), ("floor", floor)))
            + f", load {cell['load_after'][0]}")


def _median_run(runs: list[dict]) -> dict:
    """Medians over repeats of one kind: total, every phase, the restarts' own time, CPU, runs and lines."""
    breakdowns = [run_breakdown(run) for run in runs]
    return {"total": stats.median([run["wall_s"] for run in runs]),
            **{phase: stats.median([_phases(run).get(phase, 0.0) for run in runs]) for phase in fleet_timing.PHASES},
            "cpu": {phase: stats.median([_phases(run, "phase_cpu")[phase] for run in runs
                                         if _phases(run, "phase_cpu")]) for phase in fleet_timing.PHASES},
            "dispatches": stats.median([sum(_phases(run, "phase_dispatches").values()) for run in runs]),
            "module_runs": stats.median([item.get("remote_module_runs", 0) for item in breakdowns]),
            "task_host_runs": stats.median([item["task_host_runs"] for item in breakdowns if "task_host_runs" in item]),
            "batches": stats.median([item["batches"] for item in breakdowns if "batches" in item]),
            "lines": stats.median([run["lines"] for run in runs if "lines" in run]),
            "rows_80": stats.median([run["rows_80"] for run in runs if "rows_80" in run]),
            "restarts_own": stats.median([fleet_timing.restarts_own_time(_phases(run)) for run in runs
                                          if _phases(run)]),
            "controller_cpu": stats.median([run["controller_cpu_s"] for run in runs]),
            "machine_busy": max(run["machine_busy"] for run in runs)}


def median_cells(cells: list[dict]) -> dict[tuple[int, int, str], dict]:
    """(hosts, queues, config) -> medians of the role's and the floor's runs over the repeats, and whether the cell
    counts (every run complete, the machine under BUSY_LIMIT in each)."""
    grouped: dict[tuple[int, int, str], list[dict]] = {}
    for cell in cells:
        grouped.setdefault((cell["hosts"], cell["queues"], cell["config"]), []).append(cell)
    summaries = {}
    for key, repeats in grouped.items():
        runs = [cell[kind] for cell in repeats for kind in KINDS]
        complete = all(run["rc"] == 0 and run.get("effect", {}).get("complete") for run in runs)
        busy = max(run["machine_busy"] for run in runs)
        summaries[key] = {"n": len(repeats), "complete": complete, "busy": busy,
                          "counted": complete and busy < BUSY_LIMIT,
                          **{kind: _median_run([cell[kind] for cell in repeats]) for kind in KINDS}}
    return summaries


def runs_limit(hosts: int) -> int:
    """The target's task x host runs for a two-batch rollout on ``hosts`` hosts."""
    return RUNS_PER_HOST * hosts + RUNS_FIXED


def _ratio(summary: dict) -> float:
    return round(summary["role"]["total"] / summary["floor"]["total"], 2)


def cells_table(major: int, result: dict) -> str:
    rows = []
    for (hosts, queues, config), summary in sorted(median_cells(result["cells"]).items()):
        role, floor = summary["role"], summary["floor"]
        rows.append([hosts, queues, config, role["total"], floor["total"], _ratio(summary),
                     role["task_host_runs"], floor["task_host_runs"], role["batches"], role["lines"], role["rows_80"],
                     floor["lines"], role["machine_busy"], floor["machine_busy"], summary["complete"],
                     summary["counted"]])
    return tables.render(
        f"Fleet change window, PostgreSQL {major}: the role beside the floor (seconds, median of "
        f"{result['matrix']['repeats']})",
        ["hosts", "queues", "ansible.cfg", "role s", "floor s", "role / floor", "role runs", "floor runs",
         "batches", "role lines", "role rows at 80 columns", "floor lines", "busy (role)", "busy (floor)",
         "complete", "counted"], rows,
        "runs = task x host runs (every task's result on every host it ran on, skipped ones and each loop item "
        "included, a delegated one for the host it was delegated to); lines = what the run printed at default "
        "verbosity (its warnings on standard error included), and the rows they fill on a terminal 80 columns wide, "
        "which wraps a long line; busy = share of both cores busy during the run (every process on the machine); "
        "complete = "
        f"every queue on its count and every unit's runtime restarted and live, after both runs; counted = "
        f"complete and busy under {BUSY_LIMIT} in both runs (the fit and the targets use these cells only).")


def phase_table(major: int, result: dict) -> str:
    rows = []
    for (hosts, queues, config), summary in sorted(median_cells(result["cells"]).items()):
        for kind in KINDS:
            values = summary[kind]
            rows.append([hosts, queues, config, kind, values["total"], *(values[phase] for phase in SHOWN_PHASES),
                         values["other"] + values["exit"], values["controller_cpu"]])
    return tables.render(
        f"Fleet change window, PostgreSQL {major}: where the seconds go, phase by phase",
        ["hosts", "queues", "ansible.cfg", "run", "total", *SHOWN_PHASES, "other+exit", "controller CPU"], rows,
        "Phases add up to the total. restarts = the restart tasks of the batches, batch waits = until the "
        "batch's new runtimes are live, batch checks = every other task of a batch; controller CPU = CPU seconds "
        "of ansible-playbook, its forks and the modules run on the controller.")


def cpu_table(major: int, result: dict) -> str:
    """The controller's CPU seconds per phase: what a busy machine changes least."""
    rows = []
    for (hosts, queues, config), summary in sorted(median_cells(result["cells"]).items()):
        for kind in KINDS:
            values = summary[kind]
            cpu = values["cpu"]
            rows.append([hosts, queues, config, kind, values["controller_cpu"],
                         *(cpu[phase] for phase in SHOWN_PHASES),
                         None if cpu["other"] is None else cpu["other"] + (cpu["exit"] or 0.0),
                         values["dispatches"], values["module_runs"]])
    return tables.render(
        f"Fleet change window, PostgreSQL {major}: the controller's CPU seconds per phase (median)",
        ["hosts", "queues", "ansible.cfg", "run", "CPU total", *SHOWN_PHASES, "other+exit", "host dispatches",
         "module runs on hosts"], rows,
        "CPU of ansible-playbook, its forks, their SSH clients and the modules run on the controller (a fork's "
        "CPU counts when it is reaped, a moment after its task); not the producer hosts' own CPU. host "
        "dispatches = hosts handed to a worker process, skipped ones included; module runs on hosts = runs of "
        "a module on a producer host (not skipped).")


def fit_queue_counts(result: dict) -> tuple[int, ...]:
    """The queue counts measured on more than one host count: those a fit over hosts is made for."""
    host_counts: dict[int, set[int]] = {}
    for cell in result["cells"]:
        host_counts.setdefault(cell["queues"], set()).add(cell["hosts"])
    return tuple(sorted(queues for queues, hosts in host_counts.items() if len(hosts) > 1))


def forks_of(result: dict, config: str) -> int:
    return int(result.get("forks", {}).get(config) or OLD_RUN_FORKS.get(config, 5))


def fits(result: dict) -> list[dict]:
    """time = a + b x hosts for each configuration, queue count and kind, over the counted cells."""
    medians = median_cells(result["cells"])
    found = []
    for config in result["matrix"]["configs"]:
        for queues in fit_queue_counts(result):
            keys = sorted(key for key, summary in medians.items()
                          if key[1:] == (queues, config) and summary["counted"])
            for kind in KINDS:
                line = fleet_timing.line_fit([(key[0], medians[key][kind]["total"]) for key in keys])
                found.append({"config": config, "queues": queues, "kind": kind, "hosts": [key[0] for key in keys],
                              "a": line[0] if line else None, "b": line[1] if line else None,
                              "forks": forks_of(result, config)})
    return found


def fit_table(major: int, result: dict) -> str:
    rows = [[fit["config"], fit["forks"], fit["queues"], fit["kind"], ", ".join(map(str, fit["hosts"])) or "-",
             None if fit["a"] is None else round(fit["a"], 2), None if fit["b"] is None else round(fit["b"], 3)]
            for fit in fits(result)]
    if not rows:
        return ""
    return tables.render(
        f"Fleet fit over hosts, PostgreSQL {major}: seconds = a + b x hosts (least squares over the counted cells)",
        ["ansible.cfg", "forks", "queues", "run", "hosts fitted", "a (s)", "b (s per host)"], rows,
        "Seconds over the counted cells only; on 2 cores the cells from 6 hosts are busy 0.8 or more, so the "
        "hosts beyond the measured ones are projected from counts and one quiet run instead (the model's tables "
        "below).")


def runs_fits(result: dict) -> list[dict]:
    """Task x host runs = fixed + per_host x hosts for each configuration, queue count and kind, over the complete
    cells (a count does not depend on how busy the machine was)."""
    medians = median_cells(result["cells"])
    found = []
    for config in result["matrix"]["configs"]:
        for queues in fit_queue_counts(result):
            keys = sorted(key for key, summary in medians.items() if key[1:] == (queues, config)
                          and summary["complete"])
            for kind in KINDS:
                points = [(key[0], medians[key][kind]["task_host_runs"]) for key in keys
                          if medians[key][kind]["task_host_runs"] is not None]
                found.append({"config": config, "queues": queues, "kind": kind, "points": points,
                              "fit": fleet_model.runs_over_hosts(points)})
    return found


def _fit_of(found: list[dict], config: str, queues: int, kind: str) -> dict | None:
    return next((fit for fit in found if (fit["config"], fit["queues"], fit["kind"]) == (config, queues, kind)), None)


def targets(result: dict) -> list[list]:
    """[target, where, measured, limit, met] for each target of issues 26 (section 5), 43 and 57 that the
    run measured."""
    medians = median_cells(result["cells"])
    fewest = min((key[0] for key in medians), default=0)
    rows = []
    for (hosts, queues, config), summary in sorted(medians.items()):
        where = f"hosts {hosts}, queues {queues}, {config}" + ("" if summary["counted"] else " (not counted)")
        if hosts == fewest:
            rows.append(["role within 2.0x of the floor", where, _ratio(summary), RATIO_LIMIT,
                         _ratio(summary) <= RATIO_LIMIT])
        role = summary["role"]
        if role["task_host_runs"] is not None and role["batches"] == 2:
            rows.append([f"task x host runs <= {RUNS_PER_HOST} x hosts + {RUNS_FIXED} (two batches)", where,
                         role["task_host_runs"], runs_limit(hosts), role["task_host_runs"] <= runs_limit(hosts)])
        if role["lines"] is not None and role["batches"] == hosts >= LINES_TARGET_HOSTS:
            per_host = round(role["lines"] / hosts, 1)
            rows.append([f"fewer than {LINES_PER_HOST_LIMIT} lines a host, a batch a host", where, per_host,
                         LINES_PER_HOST_LIMIT, per_host < LINES_PER_HOST_LIMIT])
        few = medians.get((hosts, QUEUE_LINES_CELLS[0], config))
        if (queues == QUEUE_LINES_CELLS[1] and few and summary["complete"] and few["complete"]
                and role["lines"] is not None and few["role"]["lines"] is not None):
            more = role["lines"] - few["role"]["lines"]
            rows.append([f"{queues} queues print at most {QUEUE_LINES_LIMIT} lines more than "
                         f"{QUEUE_LINES_CELLS[0]}", where, more, QUEUE_LINES_LIMIT, more <= QUEUE_LINES_LIMIT])
    counted_runs = runs_fits(result)
    for runs in counted_runs:
        floor = _fit_of(counted_runs, runs["config"], runs["queues"], "floor")
        if runs["kind"] == "role" and runs["fit"] and floor and floor["fit"]:
            rows.append(["task x host runs per added host: the role's = the floor's",
                         f"{runs['queues']} queues, {runs['config']}, hosts "
                         f"{', '.join(str(hosts) for hosts, dummy in runs['points'])}", runs["fit"]["per_host"],
                         floor["fit"]["per_host"], runs["fit"]["per_host"] == floor["fit"]["per_host"]])
    found = fits(result)
    for fit in found:
        floor = _fit_of(found, fit["config"], fit["queues"], "floor")
        if fit["kind"] == "role" and floor and fit["b"] is not None and floor["b"]:
            ratio = round(fit["b"] / floor["b"], 2)
            rows.append(["role's b within 2x the floor's", f"{fit['queues']} queues, {fit['config']}, hosts "
                         f"{', '.join(map(str, fit['hosts']))}", ratio, SLOPE_RATIO_LIMIT, ratio <= SLOPE_RATIO_LIMIT])
    return rows


def target_table(major: int, result: dict) -> str:
    return tables.render(f"Fleet targets, PostgreSQL {major}", ["target", "where", "measured", "limit", "met"],
                         targets(result),
                         "A cell that does not count is shown for the record, not judged by.")


def phase_cost_table(major: int, result: dict) -> str:
    """Which of the role's phases grow with hosts (at the most queues fitted): the fit's b, phase by phase."""
    medians = median_cells(result["cells"])
    rows = []
    for config in result["matrix"]["configs"]:
        for queues in fit_queue_counts(result):
            keys = sorted(key for key, summary in medians.items() if key[1:] == (queues, config) and summary["counted"])
            for phase in (*SHOWN_PHASES, "other"):
                per_host = [fleet_timing.line_fit([(key[0], medians[key][kind][phase]) for key in keys])
                            for kind in KINDS]
                rows.append([config, queues, phase, *(None if line is None else round(line[1], 3)
                                                      for line in per_host)])
    if all(row[3] is None for row in rows):
        return ""
    return tables.render(
        f"Fleet phases: seconds per added host, PostgreSQL {major} (least-squares slope over the counted cells)",
        ["ansible.cfg", "queues", "phase", "role", "floor"], rows)


def task_table(major: int, result: dict, cell: dict, top: int = 25) -> str:
    """Where one role run spent its time and its task x host runs, task by task."""
    breakdown = run_breakdown(cell["role"])
    ordered = sorted(breakdown["tasks"].items(), key=lambda item: -item[1]["seconds"])[:top]
    rows = [[name[:100], entry["phase"], entry["runs"], entry.get("task_host_runs"), entry["seconds"],
             entry.get("cpu"), entry["host_runs"],
             round(entry["host_seconds"] / entry["host_runs"], 2) if entry["host_runs"] else None]
            for name, entry in ordered]
    return tables.render(
        f"Fleet role run task by task, PostgreSQL {major}: hosts {cell['hosts']}, queues {cell['queues']}, "
        f"{cell['config']} ({cell['role']['wall_s']:.1f} s, {breakdown.get('task_host_runs')} task x host runs, "
        f"{tables.cell(cell['role'].get('lines'))} lines)",
        ["task", "phase", "starts", "task x host runs", "seconds", "CPU s", "module runs on hosts",
         "s per module run"], rows,
        f"{breakdown['task_starts']} task starts, {breakdown['batches']} batches, {breakdown['remote_module_runs']} "
        f"module runs on producer hosts (mean {breakdown['remote_module_mean_s']} s each). starts = the task's "
        "starts (once per batch in a batch); seconds = from the task's start to the next task's start, summed over "
        "its starts; CPU s = the controller's CPU over the same spans.")


def batch_table(major: int, result: dict) -> str:
    """Each batch's task x host runs by host: a batch runs on its own hosts and the database controller (and
    localhost, where the role keeps the window's state) only."""
    controllers = (CONTROLLER, fleet_timing.LOCALHOST)
    rows = []
    for cell in result["cells"]:
        for kind in KINDS:
            for index, batch in enumerate(run_breakdown(cell[kind]).get("batch_task_host_runs", []), start=1):
                producers = {host: runs for host, runs in batch["hosts"].items() if host not in controllers}
                rows.append([cell["hosts"], cell["queues"], cell["config"], kind, index, batch["runs"],
                             len(producers), sum(producers.values()),
                             sum(batch["hosts"].get(host, 0) for host in controllers)])
    if not rows:
        return ""
    return tables.render(
        f"Fleet batches, PostgreSQL {major}: task x host runs of each batch",
        ["hosts", "queues", "ansible.cfg", "run", "batch", "runs", "producer hosts reached",
         "runs on producer hosts", f"runs on {CONTROLLER} and localhost"], rows,
        "A batch's runs: every task of its play (a play per batch of hosts, serial), or in older results every "
        "task loaded by its iteration of the batch loop (the include itself counted in the restart plan).")


def _task_cells(result: dict) -> list[dict]:
    """The runs shown task by task: the fewest hosts with the fewest queues, and the largest cell."""
    runs = [cell for cell in result["cells"] if "breakdown" in cell["role"]]
    if not runs:
        return []
    smallest = min(runs, key=lambda cell: (cell["hosts"], cell["queues"], cell["role"]["wall_s"]))
    largest = max(runs, key=lambda cell: (cell["hosts"], cell["queues"], cell["role"]["wall_s"]))
    return [smallest] if smallest is largest else [smallest, largest]


# What the summary keeps of a run, and of its breakdown (its tasks only if task_table shows it).
RUN_KEYS = ("rc", "wall_s", "lines", "rows_80", "controller_cpu_s", "machine_busy", "effect")
BREAKDOWN_KEYS = ("phases", "phase_cpu", "phase_dispatches", "task_host_runs", "batch_task_host_runs", "task_starts",
                  "batches", "remote_module_runs", "remote_module_mean_s")


def summary(result: dict) -> dict:
    """What the tables, the chart and the model read of a result: each run's totals, breakdown (run_breakdown) and
    costs (fleet_model.run_costs); not the callback's record, the units restarted, the warm-up run or the hosts'
    start-up (a summary: itself)."""
    shown = {id(cell["role"]) for cell in _task_cells(result)}

    def run_summary(run: dict, cell: dict) -> dict:
        breakdown, kept = run_breakdown(run), BREAKDOWN_KEYS + (("tasks",) if id(run) in shown else ())
        costs = fleet_model.run_costs(run, breakdown, cell["hosts"], CONTROLLER, forks_of(result, cell["config"]))
        return {**{key: run[key] for key in RUN_KEYS if key in run},
                "costs": asdict(costs) if costs else run.get("costs"),
                **({"breakdown": {key: breakdown[key] for key in kept if key in breakdown}} if breakdown else {})}

    return {**{key: value for key, value in result.items() if key not in ("warm_up", "boot_seconds", "units_live_s")},
            "cells": [{**{key: cell[key] for key in ("hosts", "queues", "config", "repeat")},
                       **{kind: run_summary(cell[kind], cell) for kind in KINDS}} for cell in result["cells"]]}


def table(major: int, result: dict, scale_tables: Sequence[str] = ()) -> str:
    """Every table of a result; ``scale_tables`` (benchmarks/fleet_scale.py's) after the fit over hosts."""
    parts = (cells_table(major, result), target_table(major, result), fit_table(major, result), *scale_tables,
             phase_table(major, result), cpu_table(major, result), phase_cost_table(major, result),
             batch_table(major, result), *(task_table(major, result, cell) for cell in _task_cells(result)))
    return "\n".join(part for part in parts if part)
