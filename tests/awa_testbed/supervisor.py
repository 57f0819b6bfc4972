"""Awa application processes under a real process manager (supervisord from PyPI).

No systemd runs here, so the rollout role restarts applications through a
restart command; supervisorctl is the one the test bed gives it.

``start(pid_namespace=True)`` runs supervisord in the foreground as pid 1 of a
new pid and mount namespace (``unshare --pid --fork --mount-proc``), as a
host booted of its own runs its init: its programs' pids are counted from 2
there, so two such supervisords with the same programs give them the same
pids. supervisord then knows its programs by the namespace's pids (its
pidfile says 1); this machine's pid of it is kept in ``namespace-init.pid``,
and stopping it (or killing it) ends every process of the namespace.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from supervisor.xmlrpc import Faults, SupervisorTransport

from . import lifecycle
from .processes import program_env
from .waiting import wait_until

CONFIG_TEMPLATE = """\
[unix_http_server]
file={state}/supervisor.sock
chmod=0700

[supervisord]
logfile={state}/supervisord.log
pidfile={state}/supervisord.pid
childlogdir={state}/logs
nodaemon=false
minfds=1024

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{state}/supervisor.sock
"""

PROGRAM_TEMPLATE = """
[program:{name}]
command={command}
environment={environment}
autostart=true
autorestart=unexpected
startsecs=2
stopsignal=TERM
stopwaitsecs=20
; To the program's process group: a container's unshare blocks SIGTERM and leaves it to the runtime it runs.
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile={state}/logs/{name}.log
"""


# This machine's pid of a supervisord that is pid 1 of a namespace of its own.
NAMESPACE_INIT = "namespace-init.pid"


class NoSuchProgram(LookupError):
    """supervisord has no program of that name."""


@dataclass
class Program:
    name: str
    argv: list[str]
    environment: dict[str, str] = field(default_factory=dict)


class Supervisor:
    """One supervisord with its config, socket and logs in ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.config = state_dir / "supervisord.conf"
        self.bin_dir = Path(sys.executable).parent

    @property
    def ctl(self) -> list[str]:
        """The supervisorctl command line for this supervisord."""
        return [str(self.bin_dir / "supervisorctl"), "-c", str(self.config)]

    def write_config(self, programs: list[Program]) -> None:
        (self.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        text = CONFIG_TEMPLATE.format(state=self.state_dir)
        base_env = {key: value for key, value in program_env().items() if key in ("PYTHONPATH", "NO_COLOR", "RUST_LOG", "PATH")}
        for program in programs:
            environment = {**base_env, **program.environment}
            text += PROGRAM_TEMPLATE.format(
                name=program.name, state=self.state_dir,
                command=" ".join(program.argv),
                environment=",".join(f'{key}="{value}"' for key, value in environment.items()))
        self.config.write_text(text, encoding="utf-8")
        self.config.chmod(0o600)

    @property
    def registry_key(self) -> str:
        """Its name in lifecycle's registry: the folder's name, and its path's digest (hosts of several beds share
        names)."""
        return f"{self.state_dir.name}-{hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:12]}"

    @property
    def in_pid_namespace(self) -> bool:
        return (self.state_dir / NAMESPACE_INIT).exists()

    def start(self, *, pid_namespace: bool = False, env: dict[str, str] | None = None) -> None:
        """Start supervisord (detached: it outlives this process) with ``env`` (default: program_env()), which its
        programs inherit; with ``pid_namespace``, as pid 1 of a pid and mount namespace of its own."""
        env = program_env() if env is None else env
        if pid_namespace:
            self._start_in_pid_namespace(env)
        else:
            subprocess.run([str(self.bin_dir / "supervisord"), "-c", str(self.config)], check=True,
                           env=env, stdin=subprocess.DEVNULL)
        # 3: some programs not (yet) running
        wait_until(lambda: self.run("status").returncode in (0, 3), 60, "supervisord to answer", error=RuntimeError)
        lifecycle.register("supervisord", self.registry_key, {"pid": self.pid(), "config": str(self.config)})

    def _start_in_pid_namespace(self, env: dict[str, str]) -> None:
        """supervisord in the foreground (-n) as the namespace's pid 1; ``--kill-child``: it dies with unshare."""
        with open(self.state_dir / "unshare.log", "ab") as log:
            unshare = subprocess.Popen(  # pylint: disable=consider-using-with
                ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                 str(self.bin_dir / "supervisord"), "-n", "-c", str(self.config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)

        def init() -> int | None:
            if unshare.poll() is not None:
                raise RuntimeError(f"unshare exited with {unshare.returncode}: see {self.state_dir / 'unshare.log'}")
            children = psutil.Process(unshare.pid).children()
            return children[0].pid if children else None

        pid = wait_until(init, 30, "unshare to start supervisord", interval=0.02, error=RuntimeError)
        (self.state_dir / NAMESPACE_INIT).write_text(str(pid), encoding="utf-8")

    def pid(self) -> int | None:
        """This machine's pid of supervisord; None when it never started."""
        for name in (NAMESPACE_INIT, "supervisord.pid"):
            try:
                pid = int((self.state_dir / name).read_text(encoding="utf-8").strip())
            except (OSError, ValueError):
                continue
            # A pidfile that says 1 is of a supervisord that is its namespace's init, never of this machine's.
            return pid if pid != 1 else None
        return None

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.ctl, *args], capture_output=True, text=True, check=False)

    def _rpc(self) -> Any:
        """supervisord's XML-RPC interface, over its socket: not through supervisorctl (a Python start each)."""
        transport = SupervisorTransport(None, None, f"unix://{self.state_dir / 'supervisor.sock'}")
        return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport).supervisor

    def program_info(self, name: str) -> dict | None:
        """supervisord's info of program NAME (its ``pid``, 0 when it does not run, and ``statename``); None when
        supervisord does not answer. Raises NoSuchProgram when supervisord has no program NAME. The role's status
        command asks this for every service on every read."""
        try:
            return self._rpc().getProcessInfo(name)
        except xmlrpc.client.Fault as fault:
            if fault.faultCode == Faults.BAD_NAME:
                raise NoSuchProgram(name) from None
            return None
        except OSError:
            return None

    def program_pid(self, name: str) -> int | None:
        """The pid of program NAME's current process; None when it does not run, is unknown, or supervisord is
        gone."""
        try:
            info = self.program_info(name)
        except NoSuchProgram:
            return None
        return (info or {}).get("pid") or None

    def running(self) -> list[psutil.Process]:
        """Every program's current process (psutil's, which knows a later process that took its pid apart); none
        when supervisord does not answer, or knows them by a namespace's pids."""
        if self.in_pid_namespace:
            return []
        try:
            pids = [info["pid"] for info in self._rpc().getAllProcessInfo() if info["pid"]]
        except (OSError, xmlrpc.client.Error):
            return []
        processes = []
        for pid in pids:
            try:
                processes.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        return processes

    def shutdown(self) -> None:
        pid = self.pid()
        if pid and lifecycle.pid_alive(pid):
            programs = self.running()
            # In a namespace: the unshare that runs it, which ends with it (reaped below when this process started it).
            try:
                unshare = psutil.Process(pid).ppid() if self.in_pid_namespace else None
            except psutil.NoSuchProcess:
                unshare = None
            self.run("shutdown")
            if not lifecycle.wait_pid_gone(pid, 30):
                lifecycle.terminate_pid(pid)
            if unshare:
                lifecycle.wait_pid_gone(unshare, 10)
            # A supervisord cut short (on a loaded machine, after a failed run) leaves its programs running; in a
            # namespace of its own, none outlives it (the kernel kills them with its init).
            for program in programs:
                if program.is_running():
                    lifecycle.terminate_pid(program.pid)
        lifecycle.unregister("supervisord", self.registry_key)
