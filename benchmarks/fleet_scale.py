"""The fleet benchmark's tables beyond the hosts it measured: the task x host runs over hosts, what a run costs
part by part, the model (benchmarks/fleet_model.py) checked against the cells not used for its fit, and its
projection to 50, 200, 500 and 1,000 producer hosts.

The latencies and fixed seconds come from the run with the median seconds
of the fewest hosts' repeats, the CPU per host from a line over every run of
the host counts fitted on - every count but the largest,
which is kept for the check, when three or more were measured (two or one:
the fewest hosts alone, checked against the others). A cell that does not
count (busy 0.8 or more) still gives its costs, marked so. The model is
checked on this machine's cores (recorded by benchmarks/fleet.py; 2 for
older results) and the cell's own forks and batches, against every
complete cell not in the fit, counted or not, in seconds and in the
controller's CPU. Where the machine is busy - other users' processes, or
the producer hosts' own, which share the controller's cores here and which
the model assumes do not - the seconds say how far off a saturated machine
is, not only the model; the CPU holds better.
"""

from __future__ import annotations

from . import fleet_model, fleet_report, tables
from .fleet_report import KINDS

PROJECTED_HOSTS = (50, 200, 500, 1000)
# (forks, controller cores) projected: Ansible's default forks and the benchmark's, on 4 and 16 cores.
PROJECTED_CONTROLLERS = ((5, 4), (5, 16), (50, 4), (50, 16))
# Also projected with each batch dispatched to every producer host (one play including each batch on every host:
# the role's main entry point), on the largest controller: what a play per batch of hosts saves.
EVERY_HOST_CONTROLLER = (50, 16)
# Projected with enqueue_shards_batch_size "10%": ten batches, whatever the hosts.
PROJECTED_BATCHES = 10
# The cores of the machine of results that do not record theirs (every run before 2026-12-05).
REPORT_MACHINE_CORES = 2
# Published figures to set beside the projection (docs/performance.md, section 6).
ANCHOR = ("github.com/alajmo/sake-performance (test case 2, ansible-core 2.13, pipelining, forks 10000, an "
          "i9-9900K with 16 threads, the hosts containers on the same machine): 4.7 / 17.4 / 44.1 s on "
          "50 / 200 / 500 hosts for a playbook of 3 or 4 modules, 22 to 29 ms of wall time and 70 to 110 ms of "
          "controller CPU per host and task")


def _median_run(cells: list[dict], kind: str) -> dict:
    """The run of ``kind`` with the median seconds among a cell's repeats (the lower of two middles)."""
    runs = sorted((cell[kind] for cell in cells), key=lambda run: run["wall_s"])
    return runs[(len(runs) - 1) // 2]


def _cells_of(result: dict) -> dict[tuple[int, int, str], list[dict]]:
    grouped: dict[tuple[int, int, str], list[dict]] = {}
    for cell in result["cells"]:
        grouped.setdefault((cell["hosts"], cell["queues"], cell["config"]), []).append(cell)
    return grouped


def fit_hosts(host_counts: list[int]) -> tuple[int, ...]:
    """The host counts the model is fitted on: every one but the largest, kept for the check, from three on; else
    the fewest."""
    ordered = sorted(set(host_counts))
    return tuple(ordered[:-1]) if len(ordered) >= 3 else tuple(ordered[:1])


def base_costs(result: dict) -> dict[tuple[int, str, str], tuple[fleet_model.RunCosts, dict, tuple[int, ...]]]:
    """(queues, config, run) -> the model's costs (fleet_model.fitted over the fit's host counts, from the costs of
    each run in the result's summary), the summary of the cell on the fewest hosts, and the host counts fitted on."""
    medians = fleet_report.median_cells(result["cells"])
    # (queues, config, kind) -> hosts -> the costs of the cell's median run, and of each of its runs.
    medians_of: dict[tuple[int, str, str], dict[int, fleet_model.RunCosts]] = {}
    every: dict[tuple[int, str, str], dict[int, list[fleet_model.RunCosts]]] = {}
    for (hosts, queues, config), cells in sorted(_cells_of(result).items()):
        for kind in KINDS:
            median = _median_run(cells, kind)
            for cell in (cell for cell in cells if cell[kind].get("costs")):
                costs = fleet_model.RunCosts(**cell[kind]["costs"])
                every.setdefault((queues, config, kind), {}).setdefault(hosts, []).append(costs)
                if cell[kind] is median:
                    medians_of.setdefault((queues, config, kind), {})[hosts] = costs
    found = {}
    for key, by_hosts in medians_of.items():
        fitted_on = fit_hosts(list(by_hosts))
        runs = [costs for hosts in fitted_on for costs in every[key].get(hosts, [])]
        found[key] = (fleet_model.fitted(by_hosts[fitted_on[0]], runs), medians[(fitted_on[0], *key[:2])], fitted_on)
    return found


def runs_table(major: int, result: dict) -> str:
    """The headline: the task x host runs over hosts, the role beside the floor."""
    fits = fleet_report.runs_fits(result)
    rows = []
    for fit in fits:
        if fit["kind"] != "role":
            continue
        floor = next(other for other in fits if other["kind"] == "floor"
                     and (other["config"], other["queues"]) == (fit["config"], fit["queues"]))
        rows.append([fit["config"], fit["queues"], ", ".join(f"{hosts}: {runs}" for hosts, runs in fit["points"]),
                     *(None if not item["fit"] else item["fit"][part] for item in (fit, floor)
                       for part in ("fixed", "per_host")),
                     ", ".join(f"{hosts}: {runs}" for hosts, runs in floor["points"])])
    if not rows:
        return ""
    return tables.render(
        f"Fleet task x host runs over hosts, PostgreSQL {major}: runs = fixed + per host x hosts",
        ["ansible.cfg", "queues", "role runs (hosts: runs)", "role fixed", "role per host", "floor fixed",
         "floor per host", "floor runs (hosts: runs)"], rows,
        "Counts, so every complete cell counts, busy or not. Per host: what one more producer host adds (its "
        "share of the tasks that run on every host and its restart); the role's checks and database steps are in "
        "its fixed runs. Results before the play per batch of hosts: each batch reached every host, so their per host "
        "holds for their two batches.")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def costs_table(major: int, result: dict) -> str:
    """What a run costs, part by part: the model's inputs."""
    rows = []
    for (queues, config, kind), (costs, summary, fitted_on) in sorted(base_costs(result).items()):
        rows.append([", ".join(map(str, fitted_on)), queues, config, kind, summary["counted"], summary["busy"],
                     costs.wall_s, costs.controller_cpu_s, costs.task_host_runs, _ms(costs.cpu_per_run),
                     costs.host_tasks, _ms(costs.cpu_per_host_run), _ms(costs.main_cpu_per_host_run),
                     _ms(costs.host_run_s), round(costs.restart_wave_s, 2), _ms(costs.restart_cpu_per_dispatch),
                     _ms(costs.restart_main_cpu_per_dispatch), costs.dispatches, costs.batches, round(costs.batch_s, 2),
                     round(costs.fixed_s, 1), None if costs.db_cpu_per_batch is None else round(costs.db_cpu_per_batch, 3)])
    if not rows:
        return ""
    return tables.render(
        f"Fleet costs of a run, PostgreSQL {major}: the model's inputs (the run with the median seconds)",
        ["hosts fitted on", "queues", "ansible.cfg", "run", "counted", "busy", "s", "controller CPU s",
         "task x host runs", "CPU ms per run", "host tasks", "CPU ms per host run", "of it main process",
         "host run ms", "restart s per wave", "restart CPU ms per dispatch", "of it main process", "dispatches",
         "batches",
         "batch s", "fixed s", "database CPU s per batch"], rows,
        "The seconds, runs, latencies and fixed part are the fewest hosts' (its cell's counted and busy); the CPU "
        "per host run and per dispatch the slopes of a line over the hosts fitted on. CPU = ansible-playbook and "
        "what it reaped (forks, SSH clients, modules run on the controller); per run = over all its task x host "
        "runs; host tasks = the tasks outside the batches that reached every producer host, and per host run "
        "their CPU per host (of it in ansible-playbook's own process); host run = from a host handed to a worker "
        "to its result; restart s per wave = the restarts' seconds over their waves of forks restarting hosts; "
        "per dispatch = a producer host reached by a batch's tasks (its own hosts; in older results every producer "
        "host, restarting or skipped); batch s "
        "= a batch's wait and checks; fixed = the rest of the run; database CPU per batch = the server's CPU over "
        "the batches, less its idle rate with the producers running.")


def check_table(major: int, result: dict) -> str:
    """The model on this machine against every cell not used for its fit."""
    cores = int(result.get("controller_cores") or REPORT_MACHINE_CORES)
    medians = fleet_report.median_cells(result["cells"])
    bases = base_costs(result)
    rows = []
    for (hosts, queues, config), summary in sorted(medians.items()):
        base = bases.get((queues, config, "role"))
        if base is None or hosts in base[2] or not summary["complete"]:
            continue
        costs, role = base[0], summary["role"]
        controller = fleet_model.Controller(cores=cores, forks=fleet_report.forks_of(result, config))
        # In the shape measured: a batch dispatched to its own hosts, or (older results) to every host.
        wall = fleet_model.projected(costs, hosts, controller, int(role["batches"] or costs.batches),
                                     every_host=costs.every_host)["total"]
        cpu = fleet_model.projected_cpu(costs, hosts)
        rows.append([hosts, queues, config, ", ".join(map(str, base[2])), summary["counted"], summary["busy"],
                     role["total"], round(wall, 1), _error(wall, role["total"]), role["controller_cpu"], round(cpu, 1),
                     _error(cpu, role["controller_cpu"])])
    if not rows:
        return ""
    return tables.render(
        f"Fleet model checked, PostgreSQL {major}: the role on hosts not fitted on, measured and modelled "
        f"({cores} cores)",
        ["hosts", "queues", "ansible.cfg", "fitted on", "counted", "busy", "measured s", "model s", "error",
         "measured CPU s", "model CPU s", "CPU error"], rows,
        "error = (model - measured) / measured. The model assumes a controller of its own: on this machine the "
        "producer hosts' runtimes (and SSH servers) and other users' processes share its cores, so on a busy cell "
        "its seconds read low; the CPU is the controller's own.")


def _error(modelled: float, measured: float | None) -> str | None:
    return None if not measured else f"{(modelled - measured) / measured:+.0%}"


def projection_table(major: int, result: dict) -> str:
    """The window on 50 to 1,000 hosts for each forks and controller cores, a batch dispatched to its own hosts
    (and, on the largest controller, to every host): the role's, and the floor's by the same model (what any
    playbook of its shape would take)."""
    rows = []
    # The role's rows first, then the floor's, for each queue count and configuration.
    ordered = sorted(base_costs(result).items(), key=lambda item: (*item[0][:2], KINDS.index(item[0][2])))
    for (queues, config, kind), (costs, summary, dummy) in ordered:
        if config not in result["matrix"]["configs"]:
            continue
        shapes = [(controller, False) for controller in PROJECTED_CONTROLLERS] + [(EVERY_HOST_CONTROLLER, True)]
        for (forks, cores), every_host in shapes:
            controller = fleet_model.Controller(cores=cores, forks=forks)
            windows = [fleet_model.projected(costs, hosts, controller, PROJECTED_BATCHES, every_host=every_host)
                       for hosts in PROJECTED_HOSTS]
            rows.append([kind, queues, config, forks, cores, "every host" if every_host else "its own hosts",
                         *(round(window["total"]) for window in windows),
                         round(windows[-1]["restarts"] / windows[-1]["total"] * 100),
                         fleet_model.bound_of(costs, PROJECTED_HOSTS[-1], controller),
                         "yes" if summary["counted"] else "no"])
    if not rows:
        return ""
    return tables.render(
        f"Fleet change window projected, PostgreSQL {major}: seconds on more producer hosts",
        ["playbook", "queues", "measured with", "forks", "cores", "a batch dispatched to",
         *(f"{hosts} hosts s" for hosts in PROJECTED_HOSTS),
         f"restarts % at {PROJECTED_HOSTS[-1]}", f"host tasks bound by, at {PROJECTED_HOSTS[-1]}",
         "from a counted cell"], rows,
        f"The model of benchmarks/fleet_model.py on the costs above: one unit a host, {PROJECTED_BATCHES} batches "
        "(enqueue_shards_batch_size \"10%\"), a controller of its own as fast as this machine a core, hosts that "
        "answer as fast as these. A batch dispatched to its own hosts: a play per batch of hosts with serial, as the "
        "change-window playbook and the floor run them; to every host: one play including each batch on every "
        "host, as the role's main entry point does (and both playbooks did before). Set beside: " + ANCHOR + ".")


def table(major: int, result: dict) -> str:
    """Every table of the fleet suite: benchmarks/fleet_report.py's, these after its fit over hosts."""
    scale_tables = (runs_table(major, result), costs_table(major, result), check_table(major, result),
                    projection_table(major, result))
    return fleet_report.table(major, result, scale_tables=scale_tables)
