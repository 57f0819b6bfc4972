"""Producer hosts of this machine in the shapes the rollout role meets, around one Awa database.

The role ties every live runtime (a row of ``awa.runtime_instances``) to the
service that runs it by the ``hostname`` and ``pid`` the runtime reports: its
``HOSTNAME`` variable and its pid in its own pid namespace. ``up`` brings up
PostgreSQL and a least-privilege Awa database as ``environment.up`` makes
them, then the hosts of a spec, each a supervisord with a folder of its own
(``<state>/hosts/<host>``: its config, socket and logs, the environment file
every program of the host loads, ``awa-app.env``, its fault files, the
wrapper Ansible runs as its Python). Every program runs the application of
``environment.up`` (queue ``demo``, a job a second) in one of four shapes::

    {"host-1": {"awa-app-1": "bare", "awa-app-2": "bare"},
     "host-2": {"awa-app-1": "bare"},
     "host-3": {"ctr-app": "container"},
     "host-4": {"programs": {"rep-app": {"replicas": 2}, "web-app": "enqueue_only"}, "pid_namespace": false}}

- ``bare``: the program's process is the worker runtime;
- ``container``: the runtime is pid 1 of a pid namespace of its own, with a
  new ``HOSTNAME`` (``ctr-<12 hex>``) at every start; the program's process
  is the container's ``unshare``, the runtime its descendant
  (awa_testbed.containers);
- ``{"replicas": N}``: one program running N such containers
  (``<program>-r<i>-<hex>``), stopped and restarted together;
- ``enqueue_only``: the application without a runtime: it enqueues, and has
  no ``awa.runtime_instances`` row.

A host is by default one of several booted from one image: its supervisord is
pid 1 of a pid and mount namespace of its own, and starts its programs in the
order of their names, so program N has the same pid on every such host. Its
programs get ``HOSTNAME=<host>`` (``"hostname": null``: unset, or another
name). Ansible's modules run inside it: its interpreter is a wrapper that
enters its namespaces (nsenter), so its restart and status commands see the
namespace's pids, as on a real host. ``"pid_namespace": false``: a host that
shares this machine's namespaces, and this Python.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from . import environment
from .awadb import AwaDatabase
from .processes import program_env
from .supervisor import Program, Supervisor
from .waiting import poll

BARE, CONTAINER, REPLICAS, ENQUEUE_ONLY = "bare", "container", "replicas", "enqueue_only"
HOSTS_FOLDER = "hosts"
ENV_FILE = "awa-app.env"
# Host and program names: folder, inventory, supervisord and fault file names alike.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
HOST_OPTIONS = {"programs", "pid_namespace", "hostname"}


@dataclass(frozen=True)
class Shape:
    """How a program runs its application: ``containers`` it runs it in (0: as its own process), ``runtimes`` it
    runs (0: it only enqueues)."""

    kind: str
    containers: int
    runtimes: int


def shape(value: object) -> Shape:
    """A program's shape as the spec says it: bare, container, enqueue_only or {"replicas": N}."""
    if value == BARE:
        return Shape(BARE, 0, 1)
    if value == CONTAINER:
        return Shape(CONTAINER, 1, 1)
    if value == ENQUEUE_ONLY:
        return Shape(ENQUEUE_ONLY, 0, 0)
    replicas = value.get("replicas") if isinstance(value, Mapping) and len(value) == 1 else None
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 1:
        return Shape(REPLICAS, replicas, replicas)
    raise ValueError(f"a program is {BARE}, {CONTAINER}, {ENQUEUE_ONLY} or {{'replicas': N}}, not {value!r}")


@dataclass(frozen=True)
class HostSpec:
    """A host as the spec asks for it."""

    name: str
    programs: dict[str, Shape]
    pid_namespace: bool
    hostname: str | None


def host_specs(spec: Mapping[str, Mapping]) -> list[HostSpec]:
    """SPEC's hosts: each ``{program: shape}``, or ``{"programs": {...}, "pid_namespace": bool, "hostname": ...}``."""
    hosts = []
    for name, value in spec.items():
        if not isinstance(value, Mapping):
            raise ValueError(f"host {name!r}: its programs, {{program: shape}}, not {value!r}")
        options = dict(value) if isinstance(value.get("programs"), Mapping) else {"programs": value}
        if set(options) - HOST_OPTIONS or not NAME.match(name):
            raise ValueError(f"host {name!r}: a name of letters, digits, '.', '_' and '-', and only {HOST_OPTIONS}")
        programs = {program: shape(kind) for program, kind in options["programs"].items()}
        if not programs or not all(NAME.match(program) for program in programs):
            raise ValueError(f"host {name}: one program or more, named as hosts are: {sorted(programs)}")
        hosts.append(HostSpec(name, programs, bool(options.get("pid_namespace", True)), options.get("hostname", name)))
    return hosts


def namespace_pids(pid: int) -> list[int]:
    """The process's pid in each pid namespace it is in, this machine's first (``NSpid:`` of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("NSpid:"):
            return [int(field) for field in line.split()[1:]]
    raise psutil.NoSuchProcess(pid)


def _tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants; none when it is gone (a program restarting)."""
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _runs_a_runtime(cmdline: list[str]) -> bool:
    return cmdline[1:3] == ["-m", "awa_testbed.worker"] and "--no-runtime" not in cmdline


@dataclass
class ProducerHost:
    """One host of the bed, as state.json holds it: everything an inventory of it needs."""

    name: str
    folder: str
    pid_namespace: bool
    hostname: str | None
    programs: dict[str, Shape]
    # This machine's pid of the host's pid 1, its supervisord; None when it shares this machine's namespaces.
    init_pid: int | None
    supervisorctl: list[str]
    interpreter: str
    env_file: str
    restart_command: str
    status_command: str

    @classmethod
    def from_state(cls, described: dict) -> ProducerHost:
        return cls(**{**described, "programs": {name: Shape(**kind) for name, kind in described["programs"].items()}})

    @property
    def supervisor(self) -> Supervisor:
        return Supervisor(Path(self.folder))

    def inventory_vars(self) -> dict:
        """The host's variables in an inventory: its connection and interpreter, and its services for the role."""
        return {"ansible_connection": "local", "ansible_python_interpreter": self.interpreter,
                "enqueue_shards_services": list(self.programs), "enqueue_shards_env_file": self.env_file,
                "enqueue_shards_restart_command": self.restart_command,
                "enqueue_shards_status_command": self.status_command}

    def pid(self, program: str) -> int | None:
        """The pid of the program's process as the host sees it (in a namespace of its own, the namespace's)."""
        return self.supervisor.program_pid(program)

    def machine_pid(self, program: str) -> int | None:
        """The pid of the program's process as this machine sees it."""
        pid = self.pid(program)
        if pid is None or self.init_pid is None:
            return pid
        level = len(namespace_pids(self.init_pid)) - 1
        for process in _tree(self.init_pid):
            with contextlib.suppress(psutil.NoSuchProcess, FileNotFoundError):
                pids = namespace_pids(process.pid)
                if len(pids) > level and pids[level] == pid:
                    return process.pid
        return None

    def runtime_identities(self, program: str) -> list[tuple[str | None, int]]:
        """The (hostname, pid) each runtime of the program reports once live, read from /proc: the HOSTNAME and the
        innermost pid of each worker runtime among the program's process and its descendants (a worker hung by a
        fault is one too, though it never starts its runtime)."""
        pid = self.machine_pid(program)
        identities = []
        for process in _tree(pid) if pid else []:
            with contextlib.suppress(psutil.NoSuchProcess, FileNotFoundError):
                if _runs_a_runtime(process.cmdline()):
                    identities.append((process.environ().get("HOSTNAME"), namespace_pids(process.pid)[-1]))
        return identities

    def control(self, action: str, program: str) -> str:
        """``supervisorctl ACTION PROGRAM`` (restart, stop, start); its output. Raises when it fails."""
        done = self.supervisor.run(action, program)
        if done.returncode != 0:
            raise RuntimeError(f"supervisorctl {action} {program} on {self.name} exited {done.returncode}: "
                               f"{done.stdout}{done.stderr}")
        return done.stdout

    def set_fault(self, program: str, fault: str) -> None:
        """hang or crash: how the program breaks at its next start (none: it starts well again)."""
        environment.set_fault(Path(self.folder), program, fault)


def _program(host: HostSpec, name: str, kind: Shape, state: dict, produce_rate: float, folder: Path) -> Program:
    """The host's program NAME: the application of ``environment.up``, in its shape; its records name it by its host
    (a container's by the container's hostname: its pid is 1 at every start)."""
    app = environment.app_program(name, state["runtime_url"], state["superuser_dsn"], state["queue"],
                                  folder / ENV_FILE, produce_rate, runtime=kind.runtimes > 0,
                                  label=f"{name}@{{hostname}}" if kind.containers else f"{name}@{host.name}")
    variables = {**app.environment, **({"HOSTNAME": host.hostname} if host.hostname else {})}
    if not kind.containers:
        return Program(name, app.argv, variables)
    template = "ctr-{id}" if kind.kind == CONTAINER else f"{name}-r{{replica}}-{{id}}"
    return Program(name, [sys.executable, "-m", "awa_testbed.containers", "--hostname", template,
                          "--replicas", str(kind.containers), "--", *app.argv], variables)


def _interpreter(folder: Path, init_pid: int) -> str:
    """The host's Python for Ansible (which takes no interpreter with arguments): a script that runs this Python in
    the host's pid and mount namespaces, in the caller's folder."""
    nsenter = shutil.which("nsenter")
    if not nsenter:
        raise RuntimeError("a host in a pid namespace of its own needs nsenter (util-linux)")
    wrapper = folder / "python"
    wrapper.write_text("#!/bin/sh\n# Python inside the host: the namespaces whose pid 1 is this machine's pid "
                       f"{init_pid}.\nexec {shlex.quote(nsenter)} --target {init_pid} --pid --mount --wd=\"$PWD\" -- "
                       f"{shlex.quote(sys.executable)} \"$@\"\n", encoding="utf-8")
    wrapper.chmod(0o755)
    return str(wrapper)


def _start_host(host: HostSpec, state: dict, produce_rate: float, folder: Path) -> ProducerHost:
    folder.mkdir(parents=True)
    supervisor = Supervisor(folder)
    supervisor.write_config([_program(host, name, kind, state, produce_rate, folder)
                             for name, kind in sorted(host.programs.items())])
    # A host's service manager gives its services no HOSTNAME (systemd does not): only a program's own.
    supervisor.start(pid_namespace=host.pid_namespace,
                     env={key: value for key, value in program_env().items() if key != "HOSTNAME"})
    init_pid = supervisor.pid() if host.pid_namespace else None
    return ProducerHost(
        name=host.name, folder=str(folder), pid_namespace=host.pid_namespace, hostname=host.hostname,
        programs=dict(sorted(host.programs.items())), init_pid=init_pid, supervisorctl=supervisor.ctl,
        interpreter=_interpreter(folder, init_pid) if init_pid else sys.executable, env_file=str(folder / ENV_FILE),
        restart_command=f"{shlex.join(supervisor.ctl)} restart {{service}}",
        status_command=f"{shlex.quote(sys.executable)} -m awa_testbed.started --state {shlex.quote(str(folder))} "
                       "--pid {service}")


def wait_for_runtimes(db: AwaDatabase, hosts: Mapping[str, ProducerHost], timeout: float = 90.0) -> None:
    """Until every program runs as many runtimes as its shape says, and each is live with the (hostname, pid) that
    /proc says it reports."""
    def missing() -> list[object]:
        """The programs that run fewer workers than their shape says (still starting), and the (hostname, pid)s of
        the others that are not live."""
        expected: Counter = Counter()
        short = []
        for host in hosts.values():
            for program, kind in host.programs.items():
                found = host.runtime_identities(program)
                if len(found) != kind.runtimes:
                    short.append(f"{host.name}/{program}")
                expected.update(found)
        return [*short, *sorted((expected - Counter(environment.live_runtimes(db))).elements(), key=str)]

    satisfied, left = poll(missing, lambda left: not left, timeout, interval=0.2)
    if not satisfied:
        raise RuntimeError(f"runtimes {left} were not live within {timeout}s")


def up(state_dir: Path, spec: Mapping[str, Mapping], major: int = 18, *, queue: str = "demo",
       produce_rate: float = 1.0, database: str = "awa_demo") -> dict:
    """The database as ``environment.up`` makes it, then the hosts of SPEC, their runtimes live and every
    application enqueuing; writes and returns the state (``state["hosts"]``: each ProducerHost as a dict). What a
    failure left started is stopped."""
    hosts = host_specs(spec)
    try:
        state = environment.up(state_dir, major, apps=0, queue=queue, produce_rate=produce_rate, database=database)
        started = {host.name: _start_host(host, state, produce_rate, state_dir / HOSTS_FOLDER / host.name)
                   for host in hosts}
        db = environment.database(state)
        wait_for_runtimes(db, started)
        environment.wait_for_first_jobs(db, sum(max(kind.containers, 1) for host in hosts
                                                for kind in host.programs.values()))
    except BaseException:
        down(state_dir)
        raise
    state["hosts"] = {name: asdict(host) for name, host in started.items()}
    environment.save_state(state_dir, state)
    return state


def load(state_dir: Path) -> dict[str, ProducerHost]:
    """The bed's hosts, by name."""
    return {name: ProducerHost.from_state(described)
            for name, described in environment.load_state(state_dir)["hosts"].items()}


def down(state_dir: Path) -> None:
    """Stop every host (those a failed ``up`` started too; all at once), then what ``environment.up`` made."""
    folders = sorted((state_dir / HOSTS_FOLDER).glob("*"))
    with ThreadPoolExecutor(max_workers=max(len(folders), 1)) as pool:
        list(pool.map(lambda folder: Supervisor(folder).shutdown(), folders))
    environment.down(state_dir)


@contextlib.contextmanager
def temporary(spec: Mapping[str, Mapping], **options) -> Iterator[Path]:
    """``up`` in a fresh state folder under /tmp for the block (``options`` as ``up`` takes them), then ``down``."""
    state_dir = Path(tempfile.mkdtemp(prefix="awa-shapes-"))
    try:
        up(state_dir, spec, **options)
        yield state_dir
    finally:
        down(state_dir)


def write_inventory(state_dir: Path, path: Path | None = None) -> Path:
    """An inventory of the bed (JSON, which is YAML) at PATH (default: the state folder's inventory.yml): localhost
    is the database controller (``awa_db_controller``), every host a producer (``awa_producers``), with the variables
    the role takes (extensions/testbed/group_vars/all.yml gives the same for the demo's bed). Each program's runtimes
    are in state.json; ``enqueue_shards_runtimes_per_service`` is the caller's to give."""
    state = environment.load_state(state_dir)
    path = path or state_dir / "inventory.yml"
    controller = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    shared = {"enqueue_shards_connection": state["login"], "enqueue_shards_runtime_roles": state["runtime_roles"],
              "enqueue_shards_reason": "awa.operations test bed", "enqueue_shards_wait_sleep": 1,
              "enqueue_shards_report_dir": str(state_dir)}
    groups = {"awa_db_controller": {"hosts": {"localhost": controller}},
              "awa_producers": {"hosts": {name: host.inventory_vars() for name, host in load(state_dir).items()}}}
    path.write_text(json.dumps({"all": {"vars": shared, "children": groups}}, indent=2), encoding="utf-8")
    return path
