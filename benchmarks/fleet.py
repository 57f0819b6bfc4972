"""6. A change window at fleet scale: the playbook over real SSH to N systemd hosts, phase by phase, beside a floor.

The hosts are the fleet scenario's (extensions/molecule/fleet): Debian 12
systems with systemd as PID 1, booted with systemd-nspawn from the cached
root filesystem (tests/awa_testbed/hosts.py), each running units of the
scenario's ``awa-producer@.service`` (a real awa-pg 0.6.9 runtime that works
queue demo and enqueues into it), reached over SSH as an unprivileged user
with sudo. Each host count boots its own hosts, powered off after its cells,
so that no idle host shares the cores with a measured run. The hosts are
light so that 24 fit on 2 cores: one unit each by default, its runtime with
one worker enqueuing one job a second (the scenario's unit has two workers
and 5 jobs a second; ``FleetMatrix`` says how many units and what rate).
The database is a least-privilege Awa database on the suite's durable
server; the role connects as the migrator.

For each host count N, queue count Q and Ansible configuration, two runs:

* the role: the collection's change-window playbook
  ``awa.operations.set_enqueue_shards``, as an operator runs it, changing Q
  new queues from 1 to ``shards`` (a change of queues the producers do not
  serve still restarts every producer: each live runtime is judged for every
  changed queue);
* the floor (playbooks/fleet_floor.yml): the same change in one SQL
  transaction (psql), the producers' environment file written with the
  role's template (the same essential work), then the same units restarted
  (``systemctl restart``) in the same batches of hosts, a play per batch
  (``serial``, as the change-window playbook runs them), each batch followed
  by one poll task until its new runtimes are live.

Each run's tasks are timed, and its task x host runs counted, by the callback
benchmarks/callback_plugins/bench_timer.py and split into phases and batches
by benchmarks/fleet_timing.py; the lines it printed at default verbosity
(standard output and the warnings on standard error) are counted too, and
the rows they fill on an 80-column terminal. Every run gets its own SSH
control path folder, so each pays its SSH connections as an operator's
first run does. The machine's busy share (every process on it, other
users' too) is read over each run; the tables (benchmarks/fleet_report.py)
leave out of the fit a cell at 0.8 or more. The restarts' own time is the floor's restart and wait tasks: what
restarting these batches costs whatever runs them. The database server's
CPU is read over each run (by phase, through the callback), and over the
quiet seconds before it with the producers running: what the batches cost
the database beyond that. benchmarks/fleet_scale.py projects the window to
more hosts than were measured (benchmarks/fleet_model.py).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg
from awa_testbed import hosts as fleet_hosts
from awa_testbed.awadb import AwaDatabase

from . import environment, fleet_scale, fleet_timing, server_cpu
from .change_cost import BY_HAND_SQL
from .environment import BenchServer
from .fleet_report import CONTROLLER, cell_line

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"
UNIT_FILE = ROOT / "extensions" / "molecule" / "fleet" / "files" / "awa-producer@.service"
# The template the role renders the producers' environment file from: the floor renders the same file.
ENV_TEMPLATE = ROOT / "roles" / "enqueue_shards" / "templates" / "producer.env.j2"
CHANGE_WINDOW = "awa.operations.set_enqueue_shards"
TERMINAL_COLUMNS = 80
# Hosts boot a few at a time: a dozen at once on 2 busy cores can miss the test bed's boot deadline.
BOOT_GROUP = 4
SETTLE_SECONDS = 3.0
# A unit's runtime, its producer and its recorder hold up to 13 connections: the server gets room for all.
CONNECTIONS_PER_UNIT = 16
SPARE_CONNECTIONS = 100
RUN_TIMEOUT = 1800

# Ansible configurations measured (ansible.cfg sections); every one also gets BASE_CONFIG. "+quiet" is the default
# callback without a line per host for ok and skipped results (docs/runbook.md, large fleets): what it prints.
CONFIGS = {
    "defaults": {},
    "pipelining": {"ssh_connection": {"pipelining": "True"}},
    "pipelining+forks": {"defaults": {"forks": "50"}, "ssh_connection": {"pipelining": "True"}},
    "pipelining+forks+quiet": {"defaults": {"forks": "50", "display_ok_hosts": "False",
                                            "display_skipped_hosts": "False"},
                               "ssh_connection": {"pipelining": "True"}},
}
# Ansible's own default, where a configuration does not set forks.
DEFAULT_FORKS = 5
BASE_CONFIG = {"defaults": {"host_key_checking": "True", "retry_files_enabled": "False",
                            "callback_plugins": str(CALLBACKS), "callbacks_enabled": "bench_timer"}}


@dataclass(frozen=True)
class FleetMatrix:
    """What the suite measures."""

    hosts: tuple[int, ...] = (3, 6, 12, 24)
    # Measured on the fewest hosts: the role beside the floor as the queues grow.
    queues: tuple[int, ...] = (1, 10, 100)
    # Measured on every host count: the fit over hosts, and what a 100-queue run prints on many hosts.
    host_queues: tuple[int, ...] = (1, 100)
    configs: tuple[str, ...] = ("pipelining+forks",)
    # Also measured, on the largest cell only: how much each setting gives, and what the quiet output prints.
    compare: tuple[str, ...] = ("pipelining+forks+quiet",)
    repeats: int = 1
    # Each host's producer units, and what each unit's runtime does (light hosts: see the module's docstring).
    units_per_host: int = 1
    workers: int = 1
    produce_rate: float = 1.0
    # Hosts restarted at once (enqueue_shards_batch_size, as Ansible's serial); 0: half of them, rounded up (two
    # batches). Each host restarts all of its units in its batch.
    batch_size: int = 0
    # 1 -> shards on new queues. The floor changes every queue in one transaction: at 100 queues x 4
    # priorities x 4 shards its new sequences' locks still fit a default lock table (docs/performance.md §3).
    shards: int = 4
    wait_sleep: float = 1.0

    def problems(self) -> list[str]:
        found = [f"unknown Ansible configuration {name} (choose from {', '.join(CONFIGS)})"
                 for name in (*self.configs, *self.compare) if name not in CONFIGS]
        counts = (*self.hosts, *self.queues, *self.host_queues, self.repeats, self.units_per_host, self.workers)
        if min(counts, default=0) < 1 or not self.hosts or not self.queues:
            found.append("fleet hosts, queues, repeats, units per host and workers must be at least 1")
        if self.produce_rate <= 0:
            found.append("the fleet's produce rate must be above 0 jobs a second")
        return found

    def cells(self) -> list[tuple[int, int]]:
        """(hosts, queues) measured: every queue count on the fewest hosts, ``host_queues`` on every host count."""
        fewest = min(self.hosts)
        return sorted({(hosts, queues) for hosts in self.hosts
                       for queues in (self.queues if hosts == fewest else self.host_queues)})

    def configs_at(self, host_count: int, queue_count: int) -> tuple[str, ...]:
        """The configurations measured on this cell (the comparisons only on the largest)."""
        largest = (host_count, queue_count) == max(self.cells())
        return self.configs + tuple(name for name in self.compare if largest and name not in self.configs)

    @property
    def services(self) -> tuple[str, ...]:
        """Each host's producer units."""
        return tuple(f"awa-producer@{number}" for number in range(1, self.units_per_host + 1))

    def batch_hosts(self, host_count: int) -> int:
        """Hosts restarted at once, of ``host_count``."""
        return self.batch_size or math.ceil(host_count / 2)


QUICK_MATRIX = FleetMatrix(hosts=(3,), queues=(1, 10), host_queues=(1,), compare=())


@dataclass(frozen=True)
class ProducerHosts:
    """The producer hosts of one host count as the operator's inventory names them: each host's own variables (its
    services at least), the group's (how to reach them), and the SSH client's configuration (None: no SSH)."""

    host_vars: dict[str, dict]
    group_vars: dict
    ssh_config: Path | None = None

    @property
    def names(self) -> list[str]:
        return list(self.host_vars)

    def services(self) -> dict[str, list[str]]:
        """Each host's producer services."""
        return {name: list(variables.get("enqueue_shards_services", self.group_vars.get("enqueue_shards_services", [])))
                for name, variables in self.host_vars.items()}


@dataclass
class Fleet:
    """The producer hosts, the database and the files every run shares."""

    bench: BenchServer
    db: AwaDatabase
    work_dir: Path
    hosts: ProducerHosts
    runs: int = 0
    # The database server's CPU seconds a second with the producers running and no playbook (the last settle).
    db_idle_cpu_per_s: float | None = None

    def db_cpu(self) -> float:
        """The database server's CPU seconds so far (benchmarks/server_cpu.py)."""
        return server_cpu.tree_cpu_seconds(self.bench.server.postmaster_pid())

    def inventory(self, host_count: int, matrix: FleetMatrix) -> Path:
        """The operator's inventory for the first ``host_count`` hosts (JSON is YAML)."""
        path = self.work_dir / f"inventory-{host_count}.yml"
        login = self.db.login_args("migrator")
        inventory = {"all": {
            "vars": {
                "enqueue_shards_connection": login,
                "enqueue_shards_runtime_roles": [self.db.roles["runtime1"].name],
                "enqueue_shards_reason": "awa.operations fleet benchmark",
                "enqueue_shards_env_file": "/etc/awa/producer.env",
                # The role's default, said here too: the floor renders the same file without the role.
                "enqueue_shards_environment": {},
                "enqueue_shards_env_file_owner": "root",
                "enqueue_shards_env_file_group": "awa",
                "enqueue_shards_env_file_mode": "0640",
                "enqueue_shards_restart_method": "auto",
                "enqueue_shards_batch_size": matrix.batch_hosts(host_count),
                "enqueue_shards_restart_timeout": 120,
                "enqueue_shards_converge_timeout": 300,
                "enqueue_shards_wait_sleep": matrix.wait_sleep,
            },
            "children": {
                "awa_db_controller": {"hosts": {CONTROLLER: {
                    "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}},
                "awa_producers": {
                    "hosts": {name: self.hosts.host_vars[name] for name in self.hosts.names[:host_count]},
                    "vars": self.hosts.group_vars},
            }}}
        path.write_text(json.dumps(inventory, indent=1), encoding="utf-8")
        return path

    def config(self, name: str) -> Path:
        path = self.work_dir / f"ansible-{name}.cfg"
        sections: dict[str, dict[str, str]] = {}
        for source in (BASE_CONFIG, CONFIGS[name]):
            for section, values in source.items():
                sections.setdefault(section, {}).update(values)
        path.write_text("".join(f"[{section}]\n" + "".join(f"{key} = {value}\n" for key, value in values.items())
                                for section, values in sections.items()), encoding="utf-8")
        return path

    def playbook(self, playbook: str, inventory: Path, extra: dict, config: str, label: str,
                 options: tuple[str, ...] = ()) -> dict:
        """One ansible-playbook run: its exit code, wall time, lines printed, phase breakdown, and the end of its
        output."""
        self.runs += 1
        run_dir = self.work_dir / f"run-{self.runs:03d}-{label}"
        run_dir.mkdir()
        (run_dir / "vars.json").write_text(json.dumps(extra), encoding="utf-8")
        timings = run_dir / "timings.json"
        # A fresh control path folder: this run opens its own SSH connections, as a first run does.
        # In /tmp, not the run's folder: a socket's path holds at most 107 bytes.
        control_dir = tempfile.mkdtemp(prefix="awa-cp-")
        ssh = {} if self.hosts.ssh_config is None else {"ANSIBLE_SSH_COMMON_ARGS": f"-F {self.hosts.ssh_config}"}
        env = {**os.environ, "ANSIBLE_CONFIG": str(self.config(config)), "AWA_BENCH_TIMINGS": str(timings),
               **ssh, "ANSIBLE_SSH_CONTROL_PATH_DIR": control_dir,
               # The callback reads the database server's CPU at every task start.
               "AWA_BENCH_DB_PID": str(self.bench.server.postmaster_pid())}
        command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), playbook,
                   "-e", f"@{run_dir / 'vars.json'}", *options]
        machine_before, cpu_before, load_before = machine_cpu(), children_cpu(), environment.load_average()
        db_cpu_before = self.db_cpu()
        started = time.time()
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=run_dir, env=env,
                                timeout=RUN_TIMEOUT)
        ended = time.time()
        db_cpu = self.db_cpu() - db_cpu_before
        shutil.rmtree(control_dir, ignore_errors=True)
        machine_after = machine_cpu()
        (run_dir / "output.log").write_text(result.stdout + result.stderr, encoding="utf-8")
        measured = {"rc": result.returncode, "wall_s": round(ended - started, 3),
                    # What the operator's terminal shows at default verbosity: stdout, and the warnings on stderr.
                    "lines": printed_lines(result.stdout, result.stderr),
                    # The rows those lines fill on an 80-column terminal, which wraps a long line.
                    "rows_80": terminal_rows(result.stdout + result.stderr, TERMINAL_COLUMNS),
                    # CPU seconds of ansible-playbook, its forks and the modules they ran on this machine.
                    "controller_cpu_s": round(children_cpu() - cpu_before, 2),
                    # The database server's CPU seconds over the run, and its rate with no playbook running.
                    "db_cpu_s": round(db_cpu, 2), "db_idle_cpu_per_s": self.db_idle_cpu_per_s,
                    "machine_busy": round((machine_after[0] - machine_before[0])
                                          / max(1, machine_after[1] - machine_before[1]), 2),
                    "load": [load_before, environment.load_average()]}
        if timings.exists():
            record = json.loads(timings.read_text(encoding="utf-8"))
            measured["breakdown"] = fleet_timing.breakdown(record, started, ended, CONTROLLER,
                                                           measured["controller_cpu_s"])
            measured["batches"] = fleet_timing.restarted_batches(record, CONTROLLER)
            # The callback's own record, for a later look at any task or host.
            measured["timings"] = record
        if result.returncode != 0:
            measured["output_tail"] = (result.stdout + result.stderr)[-3000:]
        return measured

    def wait_live(self, count: int, timeout: float = 180.0) -> float:
        """Until exactly ``count`` runtimes are live (old ones gone), then a short settle; returns the seconds."""
        started = time.monotonic()
        deadline = started + timeout
        live = None
        while time.monotonic() < deadline:
            live = live_runtimes(self.db)
            if live == count:
                db_cpu_before = self.db_cpu()
                time.sleep(SETTLE_SECONDS)
                self.db_idle_cpu_per_s = round((self.db_cpu() - db_cpu_before) / SETTLE_SECONDS, 4)
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)
        raise RuntimeError(f"{live} live runtimes, expected {count}, after {timeout}s")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> tuple[int, int]:
    """(busy, all) CPU time of the whole machine since boot, in clock ticks (/proc/stat)."""
    ticks = [int(value) for value in Path("/proc/stat").read_text(encoding="utf-8").split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]
    return sum(ticks) - idle, sum(ticks)


LIVE_SQL = """
SELECT count(*) FILTER (WHERE ri.started_at >= to_timestamp(%(since)s)), count(*)
FROM awa.runtime_instances AS ri
WHERE NOT ri.shutting_down
  AND ri.last_seen_at + make_interval(secs => GREATEST(((GREATEST(ri.snapshot_interval_ms, 1000) / 1000) * 3)::int, 30))
      >= now()
"""


def live_runtimes(db: AwaDatabase, since: float = 0.0) -> int:
    return db.query(LIVE_SQL, {"since": since})[0][1]


def runtimes_since(db: AwaDatabase, since: float) -> tuple[int, int]:
    """(live runtimes started since ``since``, all live runtimes)."""
    new, live = db.query(LIVE_SQL, {"since": since})[0]
    return int(new), int(live)


def printed_lines(stdout: str, stderr: str) -> int:
    """What the operator's terminal shows at default verbosity: standard output, and the warnings on standard
    error."""
    return len(stdout.splitlines()) + len(stderr.splitlines())


def terminal_rows(text: str, columns: int) -> int:
    """The rows ``text`` fills on a terminal ``columns`` wide (a longer line wraps)."""
    return sum(max(1, math.ceil(len(line) / columns)) for line in text.splitlines())


def host_batches(services: dict[str, list[str]], batch_hosts: int) -> list[list[list[str]]]:
    """The role's batches: ``batch_hosts`` hosts at a time in the inventory's order (``services``: each host's
    units), each host with all of its units; a batch as its [host, unit] pairs, sorted."""
    hosts = list(services)
    return [sorted([name, unit] for name in hosts[start:start + batch_hosts] for unit in services[name])
            for start in range(0, len(hosts), batch_hosts)]


def floor_sql(dsn: str, queues: list[str], shards: int, runtime_roles: list[str]) -> str:
    """The floor's transaction as a psql script: lanes, grants on their sequences, counts (rendered on ``dsn``)."""
    params = {"queues": queues, "shards": shards}
    with psycopg.connect(dsn) as conn:
        cursor = psycopg.ClientCursor(conn)
        statements = [cursor.mogrify(statement, params) for statement in BY_HAND_SQL]
        grant = cursor.mogrify(
            "SELECT format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %%s TO %%I', "
            "string_agg(format('awa.%%I', seq_name), ', '), role) "
            "FROM (SELECT seq_name FROM awa.queue_enqueue_heads WHERE queue = ANY(%(queues)s) "
            "UNION SELECT seq_name FROM awa.queue_claim_heads WHERE queue = ANY(%(queues)s)) AS lanes, "
            "unnest(%(roles)s::text[]) AS role GROUP BY role",
            {**params, "roles": runtime_roles})
    return ";\n".join(statements[:-1]) + ";\n" + grant + " \\gexec\n" + statements[-1] + ";\n"


def floor_vars(psql: Path, login: dict, sql_file: Path, batches: list, started: float, wait_sleep: float) -> dict:
    """The floor playbook's variables: its psql and the migrator's login, its SQL, and the role's batches
    (``batches``: each one's [host, unit] pairs) as its play of the batches takes them - each batch's hosts, in
    order (the play's hosts and serial), each host's units, and the runtimes restarted once each host's batch is
    done (its wait's goal)."""
    batch_hosts = [list(dict.fromkeys(host for host, dummy in batch)) for batch in batches]
    units: dict[str, list[str]] = {}
    live_after: dict[str, int] = {}
    restarted = 0
    for batch, hosts in zip(batches, batch_hosts):
        for host, unit in batch:
            units.setdefault(host, []).append(unit)
        restarted += len(batch)
        live_after.update(dict.fromkeys(hosts, restarted))
    return {"bench_psql": str(psql),
            "bench_pg_env": {"PGHOST": login["login_host"], "PGPORT": str(login["login_port"]),
                             "PGDATABASE": login["login_db"], "PGUSER": login["login_user"],
                             "PGPASSWORD": login["login_password"]},
            "bench_sql_file": str(sql_file), "bench_env_template": str(ENV_TEMPLATE),
            "bench_batch_hosts": batch_hosts, "bench_units": units, "bench_live_after": live_after,
            "bench_started": started,
            "bench_wait_sleep": wait_sleep, "bench_restart_timeout": 120}


@contextlib.contextmanager
def booted_hosts(work_dir: Path, count: int) -> Iterator[tuple[list[str], Path, list[float]]]:
    """``count`` hosts, booted a group at a time; one ssh_config for all; powered off afterwards."""
    names = [f"fleet-{index:02d}" for index in range(1, count + 1)]
    groups = [names[start:start + BOOT_GROUP] for start in range(0, count, BOOT_GROUP)]
    state_dirs = [work_dir / f"hosts-{index}" for index in range(len(groups))]
    seconds = []
    try:
        configs = []
        for group, state_dir in zip(groups, state_dirs):
            booted = fleet_hosts.up(state_dir, group)
            seconds.append(booted["boot_seconds"])
            # Each group has its own login key and known_hosts: its "Host *" block is made its hosts' block.
            configs.append(Path(booted["ssh_config"]).read_text(encoding="utf-8")
                           .replace("Host *\n", f"Host {' '.join(group)}\n"))
        ssh_config = work_dir / "ssh_config"
        ssh_config.write_text("".join(configs), encoding="utf-8")
        yield names, ssh_config, seconds
    finally:
        for state_dir in state_dirs:
            fleet_hosts.down(state_dir)


# What the scenario's unit runs, and what the benchmark's lighter unit runs instead (FleetMatrix).
UNIT_LOAD = {"workers": ("--queue demo=2 ", "--queue demo={:g} "),
             "produce_rate": ("--produce-rate 5 ", "--produce-rate {:g} ")}


def unit_file(matrix: FleetMatrix, work_dir: Path) -> Path:
    """The scenario's unit template with the matrix's workers and job rate."""
    text = UNIT_FILE.read_text(encoding="utf-8")
    for name, (said, instead) in UNIT_LOAD.items():
        if said not in text:
            raise RuntimeError(f"{UNIT_FILE} no longer says {said.strip()!r}: update UNIT_LOAD in benchmarks/fleet.py")
        text = text.replace(said, instead.format(getattr(matrix, name)))
    path = work_dir / "awa-producer@.service"
    path.write_text(text, encoding="utf-8")
    return path


def setup(fleet: Fleet, matrix: FleetMatrix) -> None:
    """Units installed on every host, the environment file rendered by the role; nothing started."""
    inventory = fleet.inventory(len(fleet.hosts.names), matrix)
    for playbook, extra, options in (
            (str(PLAYBOOKS / "fleet_setup.yml"), {"bench_unit_file": str(unit_file(matrix, fleet.work_dir)),
                                                  "bench_runtime_url": fleet.db.url("runtime1")}, ()),
            (CHANGE_WINDOW, {"enqueue_shards_queues": [{"queue": "demo", "shards": 1}]},
             ("--tags", "enqueue_shards_producer_config"))):
        measured = fleet.playbook(playbook, inventory, extra, matrix.configs[-1], "setup", options)
        if measured["rc"] != 0:
            raise RuntimeError(f"setting the hosts up failed:\n{measured.get('output_tail', '')}")


def activate(fleet: Fleet, matrix: FleetMatrix) -> float:
    """Start every host's units; seconds until their runtimes are live."""
    measured = fleet.playbook(str(PLAYBOOKS / "fleet_units.yml"), fleet.inventory(len(fleet.hosts.names), matrix), {},
                              matrix.configs[-1], "units")
    if measured["rc"] != 0:
        raise RuntimeError(f"starting the units failed:\n{measured.get('output_tail', '')}")
    return fleet.wait_live(len(fleet.hosts.names) * matrix.units_per_host)


def checked(fleet: Fleet, measured: dict, queues: list[str], shards: int, started: float, units: int) -> dict:
    """What the run left: queues on the count, runtimes restarted since it started, live runtimes."""
    changed = fleet.db.scalar("SELECT count(*) FROM awa.queue_meta WHERE queue = ANY(%s) AND enqueue_shards = %s",
                              (queues, shards))
    new, live = runtimes_since(fleet.db, started)
    measured["effect"] = {"queues_on_count": changed, "queues": len(queues), "restarted_runtimes": new,
                          "live_runtimes": live, "units": units,
                          "complete": changed == len(queues) and new == units == live}
    return measured


def measure_role(fleet: Fleet, matrix: FleetMatrix, host_count: int, queues: list[str], config: str) -> dict:
    started = time.time()
    # Fresh queues each run: new to the database.
    changes = [{"queue": queue, "shards": matrix.shards, "new_queue": True} for queue in queues]
    measured = fleet.playbook(CHANGE_WINDOW, fleet.inventory(host_count, matrix), {"enqueue_shards_queues": changes},
                              config, f"role-{host_count}h-{len(queues)}q-{config}")
    return checked(fleet, measured, queues, matrix.shards, started, host_count * matrix.units_per_host)


def measure_floor(fleet: Fleet, matrix: FleetMatrix, host_count: int, queues: list[str], config: str) -> dict:
    sql_file = fleet.work_dir / f"floor-{fleet.runs + 1:03d}.sql"
    sql_file.write_text(floor_sql(fleet.db.dsn(), queues, matrix.shards, [fleet.db.roles["runtime1"].name]),
                        encoding="utf-8")
    started = time.time()
    services = fleet.hosts.services()
    batches = host_batches({name: services[name] for name in fleet.hosts.names[:host_count]},
                           matrix.batch_hosts(host_count))
    measured = fleet.playbook(str(PLAYBOOKS / "fleet_floor.yml"), fleet.inventory(host_count, matrix),
                              floor_vars(fleet.bench.server.bin_dir / "psql", fleet.db.login_args("migrator"),
                                         sql_file, batches, started, matrix.wait_sleep),
                              config, f"floor-{host_count}h-{len(queues)}q-{config}")
    measured["planned_batches"] = batches
    return checked(fleet, measured, queues, matrix.shards, started, host_count * matrix.units_per_host)


def measure_cell(fleet: Fleet, matrix: FleetMatrix, host_count: int, queue_count: int, config: str,
                 repeat: int) -> dict:
    """The role and the floor on the same hosts and queue count (fresh queues each), taking turns who goes first."""
    cell = {"hosts": host_count, "queues": queue_count, "config": config, "repeat": repeat,
            "load_before": environment.load_average()}
    kinds = [("role", measure_role), ("floor", measure_floor)]
    for kind, measure in kinds if repeat % 2 == 0 else kinds[::-1]:
        queues = [f"f{fleet.runs + 1:03d}_{index:03d}" for index in range(queue_count)]
        cell[kind] = measure(fleet, matrix, host_count, queues, config)
        cell[f"{kind}_settle_s"] = fleet.wait_live(host_count * matrix.units_per_host)
    cell["load_after"] = environment.load_average()
    cell["same_batches"] = cell["role"].get("batches") == cell["floor"].get("batches")
    return cell


# How a suite gets its producer hosts for one host count: a context manager that yields a Fleet on them (with the
# run counter it is given), their units started and live, and what starting them took.
HostsUp = Callable[[BenchServer, AwaDatabase, FleetMatrix, Path, int, int],
                   contextlib.AbstractContextManager[tuple["Fleet", dict]]]


@contextlib.contextmanager
def systemd_hosts(bench: BenchServer, db: AwaDatabase, matrix: FleetMatrix, hosts_dir: Path, count: int,
                  runs: int) -> Iterator[tuple[Fleet, dict]]:
    """``count`` systemd hosts over SSH (see the module's docstring), each with the matrix's units, started."""
    with booted_hosts(hosts_dir, count) as (names, ssh_config, boot_seconds):
        group_vars = {"ansible_connection": "ssh", "ansible_user": "deploy", "ansible_become": True,
                      "ansible_python_interpreter": "/usr/bin/python3",
                      "enqueue_shards_services": list(matrix.services)}
        fleet = Fleet(bench, db, hosts_dir, ProducerHosts({name: {} for name in names}, group_vars, ssh_config),
                      runs=runs)
        setup(fleet, matrix)
        yield fleet, {"boot_seconds": boot_seconds, "units_live_s": activate(fleet, matrix)}


def run(bench: BenchServer, matrix: FleetMatrix, work_dir: Path, hosts_up: HostsUp = systemd_hosts) -> dict:
    units = max(matrix.hosts) * matrix.units_per_host
    connections = SPARE_CONNECTIONS + CONNECTIONS_PER_UNIT * units
    with environment.restarted_with(bench, {"max_connections": connections}):
        db = bench.fresh_database()
        db.setup_least_privilege(runtime_count=1, migrator_in_runtime_roles=True)
        try:
            forks = {name: int(config.get("defaults", {}).get("forks", DEFAULT_FORKS)) for name, config in CONFIGS.items()}
            # The model (benchmarks/fleet_model.py) is checked on this machine's cores.
            return {"max_connections": connections, "forks": forks, "controller_cores": os.cpu_count(),
                    **measure_fleet(bench, db, matrix, work_dir, hosts_up)}
        finally:
            db.drop()


def measure_fleet(bench: BenchServer, db: AwaDatabase, matrix: FleetMatrix, work_dir: Path,
                  hosts_up: HostsUp = systemd_hosts) -> dict:
    result: dict = {"matrix": asdict(matrix), "cells": [], "boot_seconds": {}, "units_live_s": {}, "warm_up": {}}
    fleet_dir = work_dir / f"fleet-{bench.major}"
    runs = 0
    for host_count in sorted(matrix.hosts):
        # Only the hosts a cell measures are up: with the largest count booted for every cell, the idle
        # hosts' systemd shared the 2 cores with the measured ones (12 hosts took 3 to 4 times as long).
        hosts_dir = fleet_dir / f"{host_count}-hosts"
        hosts_dir.mkdir(parents=True, exist_ok=True)
        # One run counter over every host count: each run's queues are new ones in the one database.
        with hosts_up(bench, db, matrix, hosts_dir, host_count, runs) as (fleet, started):
            key = str(host_count)
            result["boot_seconds"][key] = started["boot_seconds"]
            result["units_live_s"][key] = started["units_live_s"]
            # Unmeasured: the first run on fresh hosts also fills caches on both sides.
            result["warm_up"][key] = measure_role(fleet, matrix, host_count, [f"warmup_{host_count}"],
                                                  matrix.configs[-1])
            fleet.wait_live(host_count * matrix.units_per_host)
            for queue_count in sorted(queues for hosts, queues in matrix.cells() if hosts == host_count):
                for config in matrix.configs_at(host_count, queue_count):
                    for repeat in range(matrix.repeats):
                        cell = measure_cell(fleet, matrix, host_count, queue_count, config, repeat)
                        result["cells"].append(cell)
                        print(cell_line(cell), flush=True)
                        # Kept when the suite fails (the work folder stays then): what was measured so far.
                        (fleet_dir / "partial.json").write_text(json.dumps(result, default=str), encoding="utf-8")
            runs = fleet.runs
    return result


# The suite's tables (benchmarks/__main__.py asks this module for them).
table = fleet_scale.table
