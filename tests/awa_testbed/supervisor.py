"""Awa application processes under a real process manager (supervisord from PyPI).

No systemd runs here, so the rollout role restarts applications through a
restart command; supervisorctl is the one the test bed gives it.
"""

from __future__ import annotations

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
redirect_stderr=true
stdout_logfile={state}/logs/{name}.log
"""


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

    def start(self) -> None:
        subprocess.run([str(self.bin_dir / "supervisord"), "-c", str(self.config)], check=True,
                       env=program_env(), stdin=subprocess.DEVNULL)
        # 3: some programs not (yet) running
        wait_until(lambda: self.run("status").returncode in (0, 3), 60, "supervisord to answer", error=RuntimeError)
        lifecycle.register("supervisord", self.state_dir.name, {"pid": self.pid(), "config": str(self.config)})

    def pid(self) -> int | None:
        try:
            return int((self.state_dir / "supervisord.pid").read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
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
        when supervisord does not answer."""
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
            self.run("shutdown")
            if not lifecycle.wait_pid_gone(pid, 30):
                lifecycle.terminate_pid(pid)
            # A supervisord cut short (on a loaded machine, after a failed run) leaves its programs running.
            for program in programs:
                if program.is_running():
                    lifecycle.terminate_pid(program.pid)
        lifecycle.unregister("supervisord", self.state_dir.name)
