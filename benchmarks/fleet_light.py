"""6. The change window on light producer hosts: the controller measured past 12 hosts on 2 cores.

Booted systemd hosts over SSH (benchmarks/fleet.py) fill this machine's 2
cores from 6 hosts, so those cells measure the overload. Here each producer
host is as light as the restart contract allows: an inventory host of its
own name reached with ``ansible_connection: local``, whose services are
real Awa runtimes - the test bed's worker (awa-pg 0.6.9, queue demo, the
fleet unit's rotation intervals, the matrix's workers and job rate, the
unit's pool of 10 connections) under one
supervisord for all hosts, restarted through the role's restart contract
(``enqueue_shards_restart_command``: ``supervisorctl restart``, which returns
once the program has run 2 s; the status command asks supervisord for the
program's pid). Each host has its own environment file, which its programs
load at start as a unit's EnvironmentFile.

Lighter than a real host: no SSH (no connection, no transfer of the
module: it runs from the controller's own files), no systemd, no become;
every host's runtimes share the machine's cores with the controller and the
database. Heavier for the controller: a module run's CPU (its Python start
and the module) is the controller's here, where over SSH it is the host's.
The role and the floor (benchmarks/playbooks/fleet_floor.yml, which runs
the same restart command) run side by side on the same hosts, as the
fleet suite runs them; the tables are the fleet suite's.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from awa_testbed.awadb import AwaDatabase
from awa_testbed.supervisor import Program, Supervisor

from . import fleet
from .environment import BenchServer
from .fleet import Fleet, FleetMatrix, ProducerHosts

# The fleet unit's rotation intervals and log level (extensions/molecule/fleet/files/awa-producer@.service).
UNIT_ENVIRONMENT = {"AWA_TESTBED_ROTATE_MS": "2000,5000", "RUST_LOG": "warn", "NO_COLOR": "1"}
# Each runtime's pool: the unit's. A runtime with its producer and recorders holds its pool and 4 more, within the
# connections the suite restarts the server with (benchmarks/fleet.py: CONNECTIONS_PER_UNIT a unit).
RUNTIME_CONNECTIONS = 10


def host_names(count: int) -> list[str]:
    return [f"light-{index:02d}" for index in range(1, count + 1)]


def programs(db: AwaDatabase, matrix: FleetMatrix, hosts_dir: Path, names: list[str]) -> dict[str, list[Program]]:
    """Each host's programs: the fleet unit's runtime, with the host's environment file."""
    found: dict[str, list[Program]] = {}
    for index, name in enumerate(names):
        for unit in range(1, matrix.units_per_host + 1):
            program = f"awa-app-{index * matrix.units_per_host + unit}"
            argv = [sys.executable, "-m", "awa_testbed.worker", "--name", f"{name}/{program}",
                    "--queue", f"demo={matrix.workers}", "--connections", str(RUNTIME_CONNECTIONS),
                    "--handler-ms", "100", "--produce", "demo",
                    "--produce-rate", f"{matrix.produce_rate:g}", "--env-file", str(hosts_dir / f"{name}.env")]
            found.setdefault(name, []).append(Program(program, argv, {"AWA_DATABASE_URL": db.url("runtime1"),
                                                                      **UNIT_ENVIRONMENT}))
    return found


@contextlib.contextmanager
def light_hosts(bench: BenchServer, db: AwaDatabase, matrix: FleetMatrix, hosts_dir: Path, count: int,
                runs: int) -> Iterator[tuple[Fleet, dict]]:
    """``count`` light hosts (see the module's docstring), their programs started and live; stopped afterwards."""
    names = host_names(count)
    by_host = programs(db, matrix, hosts_dir, names)
    supervisor = Supervisor(hosts_dir)
    supervisor.write_config([program for host in by_host.values() for program in host])
    host_vars = {name: {"enqueue_shards_services": [program.name for program in by_host[name]],
                        "enqueue_shards_env_file": str(hosts_dir / f"{name}.env")} for name in names}
    group_vars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                  "enqueue_shards_env_file_owner": "root", "enqueue_shards_env_file_group": "root",
                  "enqueue_shards_restart_command": " ".join(supervisor.ctl) + " restart {service}",
                  "enqueue_shards_status_command": f"{sys.executable} -m awa_testbed.started --state {hosts_dir} "
                                                   "--pid {service}"}
    light = Fleet(bench, db, hosts_dir, ProducerHosts(host_vars, group_vars), runs=runs)
    try:
        supervisor.start()
        yield light, {"boot_seconds": [], "units_live_s": light.wait_live(count * matrix.units_per_host)}
    finally:
        supervisor.shutdown()


def run(bench: BenchServer, matrix: FleetMatrix, work_dir: Path) -> dict:
    return {"hosts_kind": "light", **fleet.run(bench, matrix, work_dir, hosts_up=light_hosts)}


# The suite's tables: the fleet suite's.
table = fleet.table
