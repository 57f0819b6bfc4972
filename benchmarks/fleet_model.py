"""The change window at 50, 200 and 1,000 producer hosts: projected from measured runs of the role and of the
floor, and checked against runs not used for the fit (benchmarks/fleet_scale.py prints both).

On 2 cores the runs measure the machine's overload as much as the
playbook, so the model takes what load spoils least: the task x host runs
counted over hosts (a line: so many fixed, so many per host), the CPU each
part costs the controller - fitted over the host counts measured, where
there are several (benchmarks/fleet_light.py's light hosts, 6 to 24), so a
per-task overhead is not read as a cost per host - and the latencies and
fixed seconds of the run on the fewest hosts. A run is split by the
benchmark's callback into

* the **host tasks**: the tasks outside the batches that reach every
  producer host (the argument spec, validation, reach, the services' read);
  each costs the controller ``cpu_per_host_run`` seconds of CPU per host
  (ansible-playbook and the forks, SSH clients and local modules it reaped),
  of which ``main_cpu_per_host_run`` in ansible-playbook's own process (the
  strategy and the results: one core, whatever the forks), and a host's run
  takes ``host_run_s`` from being handed to a worker to its result;
* the **restarts**: each batch's restart task runs on its hosts at once, so
  a batch takes ``restart_wave_s`` for each wave of ``forks`` restarting
  hosts, unless its dispatches take longer: ``restart_cpu_per_dispatch`` of
  CPU each over the cores, ``restart_main_cpu_per_dispatch`` of it in the
  main process - a dispatch is a producer host a batch's tasks reach (its
  argument spec and its restart, the first host's end-of-batch check). A
  play per batch of hosts with ``serial`` (the change-window playbook and
  the floor) reaches a batch's own hosts alone; one play that includes each
  batch on every host (the role's main entry point, and both playbooks
  before the play per batch: ``every_host``) reaches every producer host in
  each batch, restarting or skipped;
* the rest of each **batch**: its wait for the new runtimes and its checks,
  on the database controller (``batch_s``);
* the **fixed** part: everything else - start-up, the database steps, the
  final wait and summary - which grows with queues, not hosts.

A task on N hosts then takes the longest of three bounds: its hosts in waves
of ``forks``, each wave a run's latency; its CPU shared by min(cores, forks)
processes; and its main-process CPU on one core. With D the dispatches of a
batch - its own ceil(N / batches) hosts, or N with ``every_host``:

    seconds = fixed + host_tasks x max(ceil(N / forks) x host_run_s,
                                       N x cpu_per_host_run / min(cores, forks),
                                       N x main_cpu_per_host_run)
              + batches x (max(ceil(N / batches / forks) x restart_wave_s,
                               D x restart_cpu_per_dispatch / min(cores, forks),
                               D x restart_main_cpu_per_dispatch) + batch_s)

Assumed: the controller's cores are as fast as this machine's and its own
(no producer host shares them); a host answers as fast as here (the
latencies are this machine's, not a network's); the database keeps up (the
runs measure its CPU per batch); each host has the units per host of the
measured run; and the role stays as it is (the runs over hosts say so, a
functional test holds it). Pure arithmetic on a results JSON:
tests/functional/test_benchmark_fleet.py tests it without hosts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import fleet_timing


@dataclass(frozen=True)
class Controller:
    """The machine ansible-playbook runs on, and its forks."""

    cores: int
    forks: int


@dataclass(frozen=True)
class RunCosts:
    """What one measured run of the role costs, part by part (see the module's docstring)."""

    hosts: int
    wall_s: float
    task_host_runs: int
    controller_cpu_s: float
    host_tasks: int
    host_runs: int
    host_task_s: float
    cpu_per_host_run: float
    main_cpu_per_host_run: float | None
    host_run_s: float
    restarted_hosts: int
    restarts_s: float
    restart_wave_s: float
    dispatches: int
    restart_cpu_per_dispatch: float
    restart_main_cpu_per_dispatch: float | None
    batches: int
    batch_s: float
    db_cpu_per_batch: float | None

    @property
    def fixed_s(self) -> float:
        """The run's seconds that neither hosts nor batches add to."""
        return self.wall_s - self.host_task_s - self.restarts_s - self.batches * self.batch_s

    @property
    def cpu_per_run(self) -> float:
        """The controller's CPU per task x host run, over the whole run (start-up and database steps included)."""
        return self.controller_cpu_s / self.task_host_runs

    @property
    def every_host(self) -> bool:
        """Whether each batch of the run reached every producer host (one play including each batch on every
        host), not its own hosts alone (a play per batch of hosts)."""
        return self.batches > 1 and self.dispatches >= self.batches * self.hosts

    @property
    def cpu_per_added_host(self) -> float:
        """The controller's CPU one more producer host adds: its host tasks' runs and its dispatches (in its own
        batch, or in every batch when each reaches every host)."""
        return (self.host_runs * self.cpu_per_host_run + self.dispatches * self.restart_cpu_per_dispatch) / self.hosts


def _hosts(costs: RunCosts) -> float:
    return costs.hosts


def _runs_per_host_task(costs: RunCosts) -> float:
    return costs.host_runs / costs.host_tasks


def _dispatches(costs: RunCosts) -> float:
    return costs.dispatches


# The CPU costs refitted over host counts (fitted): for each, what it is the cost of one more of (a host task's run
# on one more host; one more dispatch of a batch), and how many of what it costs make its part's CPU in a run (a
# host task's runs; the batches' dispatches).
PER_HOST_CPU = {"cpu_per_host_run": (_hosts, _runs_per_host_task),
                "main_cpu_per_host_run": (_hosts, _runs_per_host_task),
                "restart_cpu_per_dispatch": (_dispatches, _dispatches),
                "restart_main_cpu_per_dispatch": (_dispatches, _dispatches)}


def runs_over_hosts(points: list[tuple[int, float]]) -> dict | None:
    """The line through (hosts, task x host runs): {"fixed": runs whatever the hosts, "per_host": runs per added
    host}; None without two host counts."""
    line = fleet_timing.line_fit(points)
    return None if line is None else {"fixed": round(line[0], 2), "per_host": round(line[1], 2)}


def _producer_runs(task: dict, controller: str) -> list[tuple[str, str, object, float]]:
    return [run for run in fleet_timing.runs_of(task, controller) if run[0] not in (controller, fleet_timing.LOCALHOST)]


def _sum_of(tasks: list[dict], key: str) -> float | None:
    values = [task[key] for task in tasks]
    return None if not values or any(value is None for value in values) else sum(values)


def run_costs(run: dict, breakdown: dict, hosts: int, controller: str, forks: int) -> RunCosts | None:
    """The parts of one measured run (benchmarks/fleet.py's run: its totals and the callback's record, and its
    breakdown by benchmarks/fleet_timing.py) with ``forks``; None for a run without a record, a host task or a
    restart."""
    record = run.get("timings")
    if not record or not breakdown:
        return None
    spans = fleet_timing.task_spans(record)
    host_tasks = [task for task in spans if task["batch"] is None
                  and len({ran_on for ran_on, *dummy in _producer_runs(task, controller)}) == hosts]
    restarts = [task for task in spans if task["phase"] == "restarts"]
    restarted = [item for task in restarts for item in _producer_runs(task, controller)
                 if item[1] != fleet_timing.SKIPPED]
    host_runs = sum(len(_producer_runs(task, controller)) for task in host_tasks)
    batches = breakdown["batches"]
    if not host_runs or not restarted or not batches:
        return None
    phases = breakdown["phases"]
    main_cpu = _sum_of(host_tasks, "cpu_main_span")
    # The batches' tasks on producer hosts, and the (batch, host) pairs they reach, restarting or skipped.
    batch_tasks = [task for task in spans if task["batch"] is not None and _producer_runs(task, controller)]
    dispatches = len({(task["batch"], ran_on) for task in batch_tasks for ran_on, *dummy in _producer_runs(task, controller)})
    restart_main_cpu = _sum_of(batch_tasks, "cpu_main_span")
    waves = sum(math.ceil(len([item for item in _producer_runs(task, controller) if item[1] != fleet_timing.SKIPPED])
                          / forks) for task in restarts)
    return RunCosts(
        hosts=hosts, wall_s=run["wall_s"], task_host_runs=breakdown["task_host_runs"],
        controller_cpu_s=run["controller_cpu_s"], host_tasks=len(host_tasks), host_runs=host_runs,
        host_task_s=sum(task["span"] for task in host_tasks),
        cpu_per_host_run=(_sum_of(host_tasks, "cpu_span") or 0.0) / host_runs,
        main_cpu_per_host_run=None if main_cpu is None else main_cpu / host_runs,
        host_run_s=sum(seconds for task in host_tasks for *dummy, seconds in _producer_runs(task, controller))
        / host_runs,
        restarted_hosts=len(restarted), restarts_s=phases["restarts"], restart_wave_s=phases["restarts"] / max(1, waves),
        dispatches=dispatches, restart_cpu_per_dispatch=(_sum_of(batch_tasks, "cpu_span") or 0.0) / dispatches,
        restart_main_cpu_per_dispatch=None if restart_main_cpu is None else restart_main_cpu / dispatches,
        batches=batches, batch_s=(phases["batch waits"] + phases["batch checks"]) / batches,
        db_cpu_per_batch=db_cpu_per_batch(breakdown, run.get("db_idle_cpu_per_s")))


def fitted(base: RunCosts, runs: list[RunCosts]) -> RunCosts:
    """``base`` (a run on the fewest hosts) with its CPU per host refitted over every run of ``runs``: each part's
    CPU against the hosts it reached, a line whose slope is the cost of one more host (what a part costs whatever
    the hosts - a task's start, its templating - stays out of it): a host task's CPU against the hosts, the
    batches' against their dispatches (PER_HOST_CPU). One host count: ``base`` as measured."""
    if len({costs.hosts for costs in runs}) < 2:
        return base
    slopes = {}
    for name, (axis, count) in PER_HOST_CPU.items():
        line = fleet_timing.line_fit([(axis(costs), getattr(costs, name) * count(costs))
                                      for costs in runs if getattr(costs, name) is not None])
        if line is not None:
            slopes[name] = max(0.0, line[1])
    return replace(base, **slopes)


def db_cpu_per_batch(breakdown: dict, idle_cpu_per_s: float | None) -> float | None:
    """The database server's CPU seconds per batch (its restarts, wait and checks), less what it uses idle with
    the producers running (``idle_cpu_per_s`` x the batches' seconds); None without its readings."""
    db_cpu = breakdown.get("phase_db_cpu")
    if not db_cpu or idle_cpu_per_s is None or not breakdown["batches"]:
        return None
    used = sum(db_cpu[phase] - idle_cpu_per_s * breakdown["phases"][phase] for phase in fleet_timing.BATCH_PHASES)
    return max(0.0, used) / breakdown["batches"]


def _longest(waves_s: float, cpu_s: float, main_cpu_s: float | None, controller: Controller) -> dict[str, float]:
    """A task's three bounds (see the module's docstring) by name."""
    bounds = {"forks": waves_s, "cores": cpu_s / min(controller.cores, controller.forks)}
    if main_cpu_s is not None:
        bounds["main process"] = main_cpu_s
    return bounds


def _host_task_bounds(costs: RunCosts, hosts: int, controller: Controller) -> dict[str, float]:
    return _longest(math.ceil(hosts / controller.forks) * costs.host_run_s, hosts * costs.cpu_per_host_run,
                    None if costs.main_cpu_per_host_run is None else hosts * costs.main_cpu_per_host_run, controller)


def host_task_s(costs: RunCosts, hosts: int, controller: Controller) -> float:
    """One host task on ``hosts`` hosts: the longest of its waves, its CPU over the cores and its main-process CPU."""
    return max(_host_task_bounds(costs, hosts, controller).values())


def restart_batch_s(costs: RunCosts, hosts: int, controller: Controller, batches: int, *,
                    every_host: bool = False) -> float:
    """One batch's restart on ``hosts`` hosts in ``batches`` batches: its hosts' restarts in waves of forks, or its
    dispatches, whichever is longer - to the batch's own hosts (a play per batch of hosts with ``serial``), or with
    ``every_host`` to every producer host (one play including each batch on every host: the role's main entry
    point)."""
    batch_hosts = math.ceil(hosts / batches)
    waves = math.ceil(batch_hosts / controller.forks)
    dispatches = hosts if every_host else batch_hosts
    main = None if costs.restart_main_cpu_per_dispatch is None else dispatches * costs.restart_main_cpu_per_dispatch
    return max(_longest(waves * costs.restart_wave_s, dispatches * costs.restart_cpu_per_dispatch, main,
                        controller).values())


def bound_of(costs: RunCosts, hosts: int, controller: Controller) -> str:
    """Which bound sets a host task's seconds on ``hosts`` hosts: forks, cores or the main process."""
    bounds = _host_task_bounds(costs, hosts, controller)
    return max(bounds, key=lambda name: bounds[name])


def projected(costs: RunCosts, hosts: int, controller: Controller, batches: int, *, every_host: bool = False) -> dict:
    """The window's seconds on ``hosts`` producer hosts restarted in ``batches`` batches, part by part (``every_host``:
    each batch dispatched to every producer host, restart_batch_s)."""
    parts = {"fixed": costs.fixed_s,
             "host tasks": costs.host_tasks * host_task_s(costs, hosts, controller),
             "restarts": batches * restart_batch_s(costs, hosts, controller, batches, every_host=every_host),
             "batches": batches * costs.batch_s}
    return {**parts, "total": sum(parts.values())}


def projected_cpu(costs: RunCosts, hosts: int) -> float:
    """The controller's CPU seconds on ``hosts`` hosts: the measured run's, plus what each added host adds."""
    return costs.controller_cpu_s + (hosts - costs.hosts) * costs.cpu_per_added_host
