"""Where a playbook's time went: the bench_timer callback's records turned into phases, tasks and hosts.

Every second of an ansible-playbook run is given to exactly one phase. A
task owns the time from its start until the next task starts (the last one
until the playbook ends), so templating, include processing and the
strategy's own work between tasks count for the task before them, and the
phases add up to the run. Start-up is from the process start to the first
task; exit is from the end of the playbook until the process returned.

A task's phase comes from the tags the role's entry points give each phase
(``enqueue_shards_preflight``, ...; the floor playbook tags its tasks
``bench_change``, ``bench_producer_config``, ``bench_pickup`` and
``bench_wait``), but for the tasks of a batch. A batch is a batch of hosts of
a play with ``serial`` - the change-window playbook's and the floor's play
per batch: each of its starts is a play of the record, marked serial - or,
in the one-play shape (the role's main entry point, and every record taken
before the playbooks ran a play per batch), an iteration of a looped include
of the pickup phase. A batch's tasks are its restarts (the service manager's
tasks, the floor's restart command tagged ``bench_restart``, or the role's
``awa_producer_services`` run on the batch's hosts), its waits for the
restarted runtimes (a read of the queues with ``wait``, or the floor's
``bench_wait``), and its checks: every other task of the batch (its plays'
argument spec, reads, state, verdict). The pickup tasks outside the batches
are the restart plan. A record of a callback that did not mark serial plays
reads every play as a plain one: its batches are those of a looped include.

A run's cost in task x host runs: every (task, host) result the callback
listed - ok, changed, skipped, failed or unreachable, each loop item once,
counted for the host it ran on (the host a task or item was delegated to).
``run_once`` tasks count once. Split by phase, by batch and, within a batch,
by host: a batch that dispatches only to its own hosts has runs on them and
on the database controller, none on the others.
"""

from __future__ import annotations

import re
from collections import defaultdict

PHASES = ("start-up", "validate", "preflight", "change", "producer config", "restart plan", "restarts",
          "batch waits", "batch checks", "final wait", "summary", "other", "exit")
PHASE_TAGS = {
    # First: the window's record (the role's phases/8_record.yml) carries the tags of every phase after the change.
    "enqueue_shards_summary": "summary",
    "enqueue_shards_preflight": "preflight",
    "enqueue_shards_change": "change",
    "bench_change": "change",
    "enqueue_shards_producer_config": "producer config",
    "bench_producer_config": "producer config",
    "enqueue_shards_pickup": "pickup",
    "bench_pickup": "pickup",
    "enqueue_shards_wait": "final wait",
}
RESTART_ACTIONS = frozenset({"ansible.builtin.systemd_service", "ansible.builtin.systemd", "ansible.builtin.service",
                             "systemd_service", "systemd", "service", "awa.operations.awa_producer_services"})
# Actions Ansible runs in the controller's own process: no module is sent to the host.
CONTROLLER_ACTIONS = frozenset(prefix + name for prefix in ("", "ansible.builtin.") for name in (
    "set_fact", "assert", "debug", "include_tasks", "import_tasks", "include_role", "meta", "fail", "pause",
    "validate_argument_spec", "add_host", "group_by", "set_stats", "include_vars"))
# The floor's restart: a command (systemctl, or the inventory's restart command), told apart by its tag.
RESTART_TAG = "bench_restart"
BATCH_PHASES = ("restarts", "batch waits", "batch checks")
SKIPPED = "skipped"
# Ansible's implicit host, the machine ansible-playbook runs on (the role writes its report there).
LOCALHOST = "localhost"
# Task names the role numbers per batch ("... - batch 2"): one row per task, not per batch.
BATCH_SUFFIX = re.compile(r" - batch \d+$")


def is_wait(task: dict) -> bool:
    """The floor's poll, or a read of the queues that waits (the info module, or the role's private read since 0.5.0)."""
    return "bench_wait" in task["tags"] or (task["action"].endswith("_info") and bool(task["wait"]))


def _tagged_phase(task: dict) -> str:
    return next((phase for tag, phase in PHASE_TAGS.items() if tag in task["tags"]),
                "validate" if "always" in task["tags"] else "other")


def serial_plays(record: dict) -> set[int]:
    """The record's plays (indexes) that are a batch of hosts of a play with serial, as the callback marks them."""
    return {index for index, play in enumerate(record.get("plays", [])) if play.get("serial")}


def batch_of(task: dict, serial: set[int]) -> str | None:
    """The batch a task belongs to, None outside the batches (see the module's docstring): its play, when that is
    a batch of a play with serial (``serial``: serial_plays), else the iteration of the looped include that loaded
    it, for a task of the pickup phase."""
    if task.get("play") in serial:
        return f"play {task['play']}"
    if task["loop"] is not None and _tagged_phase(task) == "pickup":
        return f"iteration {task['loop']['iteration']}"
    return None


def phase_of(task: dict, batch: str | None) -> str:
    """The phase a task's time counts for (see the module's docstring); ``batch``: the task's (batch_of)."""
    if batch is None:
        base = _tagged_phase(task)
        return "restart plan" if base == "pickup" else base
    if is_wait(task):
        return "batch waits"
    if task["action"] in RESTART_ACTIONS or RESTART_TAG in task["tags"]:
        return "restarts"
    return "batch checks"


# The CPU counters the callback reads at each task start (and at the end): all of ansible-playbook with the
# processes it reaped, its own process alone, the database server (benchmarks/callback_plugins/bench_timer.py).
COUNTERS = ("cpu", "cpu_main", "db_cpu")


def _counter_spans(record: dict, counter: str) -> list[float | None]:
    """Each task's growth of ``counter`` until the next task starts (the last one until the end); None unread."""
    tasks = record["tasks"]
    ends = [following.get(counter) for following in tasks[1:]] + [record.get(f"{counter}_ended")]
    return [end - task[counter] if end is not None and task.get(counter) is not None else None
            for task, end in zip(tasks, ends)]


def task_spans(record: dict) -> list[dict]:
    """Each task with its span (until the next task starts), the CPU seconds of each counter over that span
    (``cpu_span``, ``cpu_main_span``, ``db_cpu_span``; None where the record has no such readings), its batch
    (None outside the batches) and its phase."""
    tasks = record["tasks"]
    ends = [following["start"] for following in tasks[1:]] + [record.get("ended", tasks[-1]["start"] if tasks else 0)]
    counters = [dict(zip((f"{counter}_span" for counter in COUNTERS), spans))
                for spans in zip(*(_counter_spans(record, counter) for counter in COUNTERS))]
    serial = serial_plays(record)
    batches = [batch_of(task, serial) for task in tasks]
    return [{**task, **spans, "span": max(0.0, end - task["start"]), "batch": batch, "phase": phase_of(task, batch)}
            for task, end, spans, batch in zip(tasks, ends, counters, batches)]


def runs_of(task: dict, controller: str) -> list[tuple[str, str, object, float]]:
    """(host it ran on, outcome, loop item, seconds) of each run of this task (see the module's docstring).

    Seconds: the inventory host's part of the task, shared by the runs it
    listed (a delegated loop runs its items one after the other). A record
    of a callback that did not list runs (the 0.2.0 results) counts one run
    per host that ended, on the controller when the task was delegated.
    """
    runs = []
    for name, host in task["hosts"].items():
        seconds = host["end"] - host["start"] if "start" in host and "end" in host else 0.0
        listed = host.get("runs")
        if listed is None:
            listed = [[controller if task["delegated"] else name, host["status"], None]] if "status" in host else []
        runs += [(ran_on, outcome, item, seconds / len(listed)) for ran_on, outcome, item in listed]
    return runs


def host_runs(task: dict, controller: str) -> list[tuple[str, float]]:
    """(host, seconds) of each module run this task sent to a producer host over its connection.

    Left out: skipped runs, runs on the database controller or on localhost
    (tasks delegated there) and actions that run in Ansible's own process.
    """
    if task["action"] in CONTROLLER_ACTIONS:
        return []
    return [(host, seconds) for host, outcome, dummy, seconds in runs_of(task, controller)
            if host not in (controller, LOCALHOST) and outcome != SKIPPED]


def task_label(task: dict) -> str:
    """The task's name without the role's prefix and batch number."""
    return BATCH_SUFFIX.sub("", task["name"].split(" : ", 1)[-1])


def phase_cpu(spans: list[dict], process_cpu: float | None, counter: str = "cpu") -> dict | None:
    """CPU seconds of ansible-playbook and its reaped children per phase (None: the record has no CPU readings);
    with ``counter`` "db_cpu", the database server's over the same spans.

    A fork's CPU counts when the strategy reaps it, a moment after its task.
    Start-up is the CPU used before the first task (ansible-playbook's; the
    server's is not read before it); exit the rest of the process's total
    (``process_cpu``, measured by the caller), when given.
    """
    if not spans or any(task[f"{counter}_span"] is None for task in spans):
        return None
    cpu = dict.fromkeys(PHASES, 0.0)
    cpu["start-up"] = spans[0]["cpu"] if counter == "cpu" else 0.0
    for task in spans:
        cpu[task["phase"]] += task[f"{counter}_span"]
    if process_cpu is not None:
        cpu["exit"] = max(0.0, process_cpu - sum(cpu.values()))
    return {name: round(seconds, 3) for name, seconds in cpu.items()}


def breakdown(record: dict, process_started: float, process_ended: float, controller: str,
              process_cpu: float | None = None) -> dict:
    """Phase seconds (and CPU seconds), the tasks by name, and the producer hosts' module runs of one playbook run."""
    spans = task_spans(record)
    phases = dict.fromkeys(PHASES, 0.0)
    dispatches = dict.fromkeys(PHASES, 0)
    first = spans[0]["start"] if spans else record.get("ended", process_ended)
    phases["start-up"] = max(0.0, first - process_started)
    phases["exit"] = max(0.0, process_ended - record.get("ended", process_ended))
    task_host_runs = dict.fromkeys(PHASES, 0)
    outcomes: dict[str, int] = defaultdict(int)
    batch_runs: dict[str, dict] = {}
    by_name: dict[str, dict] = {}
    remote = []
    per_host: dict[str, float] = defaultdict(float)
    for task in spans:
        phases[task["phase"]] += task["span"]
        dispatches[task["phase"]] += len(task["hosts"])
        ran = runs_of(task, controller)
        task_host_runs[task["phase"]] += len(ran)
        for dummy, outcome, dummy_item, dummy_seconds in ran:
            outcomes[outcome] += 1
        if task["batch"] is not None:
            batch = batch_runs.setdefault(task["batch"], {"runs": 0, "hosts": defaultdict(int)})
            batch["runs"] += len(ran)
            for host, dummy, dummy_item, dummy_seconds in ran:
                batch["hosts"][host] += 1
        runs = host_runs(task, controller)
        remote += [seconds for dummy, seconds in runs]
        for host, seconds in runs:
            per_host[host] += seconds
        entry = by_name.setdefault(task_label(task), {"phase": task["phase"], "action": task["action"], "runs": 0,
                                                      "seconds": 0.0, "cpu": 0.0, "dispatches": 0, "host_runs": 0,
                                                      "host_seconds": 0.0, "retries": 0, "task_host_runs": 0})
        entry["runs"] += 1
        entry["task_host_runs"] += len(ran)
        entry["seconds"] += task["span"]
        entry["cpu"] += task["cpu_span"] or 0.0
        entry["dispatches"] += len(task["hosts"])
        entry["host_runs"] += len(runs)
        entry["host_seconds"] += sum(seconds for dummy, seconds in runs)
        entry["retries"] += task["retries"]
    return {
        "total_s": round(process_ended - process_started, 3),
        "phases": {name: round(seconds, 3) for name, seconds in phases.items()},
        "phase_cpu": phase_cpu(spans, process_cpu),
        # The database server's CPU seconds per phase (records with its readings: AWA_BENCH_DB_PID).
        "phase_db_cpu": phase_cpu(spans, None, "db_cpu"),
        # Hosts handed to a worker process, skipped ones included: each is a fork of ansible-playbook.
        "phase_dispatches": dispatches,
        # Task x host runs (see the module's docstring), in all, by phase, by outcome, and each batch's by host.
        "task_host_runs": sum(task_host_runs.values()),
        "phase_task_host_runs": task_host_runs,
        "outcomes": dict(sorted(outcomes.items())),
        "batch_task_host_runs": [{"runs": batch["runs"], "hosts": dict(sorted(batch["hosts"].items()))}
                                 for batch in batch_runs.values()],
        "tasks": {name: dict(entry, seconds=round(entry["seconds"], 3), cpu=round(entry["cpu"], 3),
                             host_seconds=round(entry["host_seconds"], 3))
                  for name, entry in by_name.items()},
        "task_starts": len(spans),
        "batches": len(batch_runs),
        "remote_module_runs": len(remote),
        "remote_module_mean_s": round(sum(remote) / len(remote), 3) if remote else None,
        "host_module_seconds": {host: round(seconds, 3) for host, seconds in sorted(per_host.items())},
    }


def restarted_units(host: str, item: object) -> list[list[str]]:
    """The (host, unit) pairs one restart run restarted: the floor loops over unit names; the role's run on each host
    of a batch records the services it restarted (``{services: [...]}``), as its loop over one entry per host
    (``{host, services, ...}``, delegated to that host) did before 0.5.0."""
    if isinstance(item, dict):
        return [[host, str(service)] for service in item.get("services", [])]
    return [] if item is None else [[host, str(item)]]


def restarted_batches(record: dict, controller: str) -> list[list[list[str]]]:
    """The (host, unit) pairs each batch restarted, in order: what its restart tasks did."""
    batches: dict[str, list[list[str]]] = {}
    for task in task_spans(record):
        if task["phase"] != "restarts":
            continue
        restarted = batches.setdefault(task["batch"], [])
        for name, host in task["hosts"].items():
            if "runs" not in host:  # a 0.2.0 record: the unit names of the host's own items
                if name != controller and host.get("status") not in (None, SKIPPED):
                    restarted += [[name, item] for item in host.get("items", [])]
                continue
            for ran_on, outcome, item, dummy in runs_of({**task, "hosts": {name: host}}, controller):
                if ran_on != controller and outcome not in (SKIPPED, "failed", "unreachable"):
                    restarted += restarted_units(ran_on, item)
    return [sorted(restarted) for restarted in batches.values()]


def restarts_own_time(phases: dict) -> float:
    """The floor's restarts and waits for the restarted runtimes: what any rollout of these batches costs."""
    return round(phases["restarts"] + phases["batch waits"], 3)


def line_fit(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line y = a + b x through the points: (a, b); None with fewer than two distinct x."""
    if len({x for x, dummy in points}) < 2:
        return None
    mean_x = sum(x for x, dummy in points) / len(points)
    mean_y = sum(y for dummy, y in points) / len(points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, dummy in points)
    return mean_y - slope * mean_x, slope


def plane_fit(points: list[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Least-squares plane z = a + b x + c y through the points: (a, b, c); None unless x and y vary apart (three
    points at least, not on one line)."""
    if len(points) < 3:
        return None
    mean_x, mean_y, mean_z = (sum(point[axis] for point in points) / len(points) for axis in range(3))
    centred = [(x - mean_x, y - mean_y, z - mean_z) for x, y, z in points]
    sxx, syy, sxy, sxz, syz = (sum(point[i] * point[j] for point in centred)
                               for i, j in ((0, 0), (1, 1), (0, 1), (0, 2), (1, 2)))
    determinant = sxx * syy - sxy * sxy
    if abs(determinant) < 1e-9:
        return None
    b, c = (sxz * syy - syz * sxy) / determinant, (syz * sxx - sxz * sxy) / determinant
    return mean_z - b * mean_x - c * mean_y, b, c
