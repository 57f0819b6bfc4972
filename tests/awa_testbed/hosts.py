"""Producer hosts: real Debian 12 (or 11) systems with systemd as PID 1, booted with systemd-nspawn.

A host is named ``NAME`` (Debian 12) or ``NAME:bullseye`` (Debian 11). A
Debian 11 host also gets Debian 12's tree, read-only, at rootfs.RUNTIME_ROOT:
its Python 3.9 runs Ansible's modules, and its producer units run awa-pg (which
needs Python 3.10) from that tree as their root directory.

Each host boots an overlay of the cached root filesystem (rootfs.py): the
overlay is mounted in a private mount namespace that lives exactly as long
as the container, so nothing stays mounted on the controller. Its own layer
holds what makes it one host: a host name, an ed25519 host key, sshd on its
own port on 127.0.0.1 (the hosts share the controller's network, so they
also reach the test bed's PostgreSQL there), the login user's authorized
key and the test bed's Python package for the producer program.

``up`` writes ``hosts.json`` and an ``ssh_config`` (one ``Host`` entry per
host, the key, a known_hosts file with each host key) into the state folder:
Ansible and testinfra reach the hosts with ``ssh -F ssh_config NAME``.
Every container is registered with the lifecycle registry, so ``python -m
awa_testbed reap --run ID`` shuts them down (SIGTERM makes systemd-nspawn
power the container off cleanly).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import lifecycle, rootfs
from .pgserver import free_port
from .waiting import wait_until

PACKAGE_DIR = Path(__file__).resolve().parent
BOOT_TIMEOUT = 90.0
# The overlay is mounted in the container's own mount namespace, then nspawn replaces the shell.
BOOT_SCRIPT = ('mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" && shift 3 && '
               'exec systemd-nspawn --quiet --register=no --keep-unit --console=read-only -b -D "$@"')

SSHD_CONFIG = """\
# Written by the awa.operations test bed: this host's sshd, on its own port.
Port {port}
ListenAddress 127.0.0.1
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowUsers {user}
"""

SSH_CLIENT_HOST = """\
Host {name}
  HostName 127.0.0.1
  Port {port}
  HostKeyAlias {name}
"""

SSH_CLIENT_COMMON = """\
Host *
  User {user}
  IdentityFile {identity}
  IdentitiesOnly yes
  UserKnownHostsFile {known_hosts}
  StrictHostKeyChecking yes
  PasswordAuthentication no
"""


class HostError(RuntimeError):
    """A host did not come up; the message carries its boot log."""


@dataclass
class Host:
    """One booted container and how to reach it."""

    name: str
    machine: str
    port: int
    folder: str
    nspawn_pid: int = 0
    suite: str = rootfs.BOOKWORM.suite
    # Where the host's pids start after each boot (_start_pids_at): each host its own range.
    pid_base: int = 0

    @property
    def upper(self) -> Path:
        return Path(self.folder) / "upper"

    @property
    def boot_log(self) -> Path:
        return Path(self.folder) / "boot.log"

    def leader_pid(self) -> int | None:
        """The container's PID 1 (systemd), seen from the controller."""
        children = Path(f"/proc/{self.nspawn_pid}/task/{self.nspawn_pid}/children")
        try:
            pids = children.read_text(encoding="utf-8").split()
        except OSError:
            return None
        return int(pids[0]) if pids else None

    def run(self, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command inside the container (all its namespaces), as root."""
        leader = self.leader_pid()
        if leader is None:
            raise HostError(f"{self.name}: the container is not running\n{self.boot_log_tail()}")
        return subprocess.run(["nsenter", "-t", str(leader), "-a", *argv], capture_output=True, text=True,
                              check=False, timeout=timeout)

    def boot_log_tail(self, lines: int = 40) -> str:
        try:
            text = self.boot_log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _owned_like_lower(upper: Path, lower: Path, relative: Path) -> None:
    """Create the parents of ``relative`` in the upper layer with the lower layer's owner and mode.

    A directory that exists in both layers shows the upper one's attributes;
    one only in the upper layer is root's, 0755.
    """
    for parent in reversed(relative.parents):
        source, target = lower / parent, upper / parent
        if parent == Path(".") or target.exists():
            continue
        target.mkdir()
        info = source.stat() if source.exists() else None
        target.chmod(info.st_mode & 0o7777 if info else 0o755)
        shutil.chown(target, info.st_uid if info else 0, info.st_gid if info else 0)


def _put(host: Host, tree: Path, path: str, content: str | bytes, mode: int, owner: tuple[int, int] = (0, 0)) -> None:
    relative = Path(path.lstrip("/"))
    _owned_like_lower(host.upper, tree, relative)
    target = host.upper / relative
    target.write_bytes(content.encode() if isinstance(content, str) else content)
    target.chmod(mode)
    shutil.chown(target, *owner)


def _host_key(folder: Path, name: str) -> tuple[bytes, str]:
    key = folder / "ssh_host_ed25519_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key.read_bytes(), key.with_suffix(".pub").read_text(encoding="utf-8").strip()


def _prepare_layer(host: Host, tree: Path, client_public_key: str) -> str:
    """Write the host's own files into its upper layer; returns its public host key."""
    for sub in ("upper", "work", "root"):
        (Path(host.folder) / sub).mkdir(parents=True)
    private_key, public_key = _host_key(Path(host.folder), host.name)
    uid, gid = rootfs.login_ids(tree)
    home = f"/home/{rootfs.LOGIN_USER}"
    _put(host, tree, "/etc/hostname", f"{host.name}\n", 0o644)
    _put(host, tree, "/etc/hosts", f"127.0.0.1 localhost\n127.0.1.1 {host.name}\n", 0o644)
    _put(host, tree, "/etc/ssh/sshd_config.d/awa-testbed.conf",
         SSHD_CONFIG.format(port=host.port, user=rootfs.LOGIN_USER), 0o644)
    _put(host, tree, "/etc/ssh/ssh_host_ed25519_key", private_key, 0o600)
    _put(host, tree, "/etc/ssh/ssh_host_ed25519_key.pub", public_key + "\n", 0o644)
    _put(host, tree, f"{home}/.ssh/authorized_keys", client_public_key + "\n", 0o600, (uid, gid))
    ssh_dir = host.upper / home.lstrip("/") / ".ssh"
    ssh_dir.chmod(0o700)
    shutil.chown(ssh_dir, uid, gid)
    for module in sorted(PACKAGE_DIR.glob("*.py")):
        _put(host, tree, f"{rootfs.APP_DIR}/{PACKAGE_DIR.name}/{module.name}", module.read_bytes(), 0o644)
    return public_key


def _boot(host: Host, trees: dict[str, Path]) -> None:
    folder = Path(host.folder)
    # A Debian 11 host's producer units run from Debian 12's tree (its venv has awa-pg).
    runtime = [] if host.suite == rootfs.BOOKWORM.suite else \
        [f"--bind-ro={trees[rootfs.BOOKWORM.suite]}:{rootfs.RUNTIME_ROOT}"]
    with open(host.boot_log, "ab") as log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", BOOT_SCRIPT, "boot",
             str(trees[host.suite]), str(host.upper), str(folder / "work"), str(folder / "root"), "-M", host.machine,
             *runtime],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=rootfs.nspawn_env(),
            start_new_session=True)
    host.nspawn_pid = process.pid
    lifecycle.register("host", host.machine, {"pid": process.pid, "base_dir": host.folder})
    _start_pids_at(host)


# Where every host's pids start, past those its boot hands out.
FIRST_PID_BASE = 1000


def pid_bases(count: int) -> list[int]:
    """Where each of ``count`` hosts' pids start: the same number on every host, as on hosts booted from one image,
    so a producer on one host has the main pid of a unit on another. The role tells their runtimes apart by the
    host name each reports (its environment file's HOSTNAME); without it they are judged by count (the rule is
    unit-tested: tests/unit/plugins/plugin_utils/rollout/test_match.py)."""
    return [FIRST_PID_BASE] * count


def _start_pids_at(host: Host) -> None:
    """Set the host's next pid to its ``pid_base`` as soon as its PID namespace exists, before its units start."""
    own_namespace = os.readlink("/proc/self/ns/pid")

    def container_namespace() -> int | None:
        leader = host.leader_pid()
        try:
            return leader if leader and os.readlink(f"/proc/{leader}/ns/pid") != own_namespace else None
        except OSError:
            return None

    leader = wait_until(container_namespace, BOOT_TIMEOUT,
                        lambda: f"{host.name}'s PID namespace\n{host.boot_log_tail()}", interval=0.01, error=HostError)
    # ns_last_pid is the writer's PID namespace's: written from a process that entered it (the controller's /proc).
    subprocess.run(["nsenter", "-t", str(leader), "--pid", "--", "sh", "-c",
                    f"echo {host.pid_base} > /proc/sys/kernel/ns_last_pid"], check=True, capture_output=True)


def _restart_failed_units(host: Host) -> bool:
    """Start the units that failed during boot once more; whether every one of them runs now.

    Seen once in CI: systemd-user-sessions.service failed while three hosts booted at once on 2 cores, and
    started fine when asked again. A unit that fails twice is a broken host.
    """
    listing = host.run("systemctl", "--failed", "--no-legend", "--plain").stdout
    failed = [line.split()[0] for line in listing.splitlines() if line.strip()]
    if not failed:
        return True
    host.run("systemctl", "reset-failed", *failed)
    return host.run("systemctl", "start", *failed).returncode == 0 and \
        host.run("systemctl", "is-system-running").stdout.strip() == "running"


# While it exists, pam_nologin refuses every login but root's ("System is booting up").
NOLOGIN = "/run/nologin"


def _wait_booted(host: Host, deadline: float) -> None:
    """Until systemd reached its default target, logins are allowed and sshd accepts connections."""
    def booted() -> bool:
        if not lifecycle.pid_alive(host.nspawn_pid):
            raise HostError(f"{host.name}: systemd-nspawn exited during boot\n{host.boot_log_tail()}")
        if host.leader_pid() is None:
            return False
        state = host.run("systemctl", "is-system-running", "--wait",
                         timeout=max(1.0, deadline - time.monotonic())).stdout.strip()
        if state == "degraded" and not _restart_failed_units(host):
            failed = host.run("systemctl", "--failed", "--no-legend").stdout.strip()
            status = host.run("systemctl", "status", "--failed", "--no-pager", "--lines=20").stdout.strip()
            raise HostError(f"{host.name}: booted with failed units:\n{failed}\n{status}\n{host.boot_log_tail()}")
        return state == "running"

    wait_until(booted, max(0.0, deadline - time.monotonic()),
               lambda: f"{host.name} to boot (at most {BOOT_TIMEOUT}s)\n{host.boot_log_tail()}", interval=0.2,
               error=HostError)
    _wait_logins_allowed(host, deadline)
    with socket.create_connection(("127.0.0.1", host.port), timeout=5):
        pass


def _wait_logins_allowed(host: Host, deadline: float) -> None:
    """Until /run/nologin is gone, so sshd lets the unprivileged login user in (pam_nologin).

    systemd-user-sessions.service removes it once the boot allows logins. Seen once on a clean clone's run, with
    molecule booting its hosts beside the other steps: the hosts reported "running" and the first SSH login was
    refused with "System is booting up" - the file was still there. Restarting the unit once is what removes it.
    """
    def allowed() -> bool:
        return host.run("test", "-e", NOLOGIN).returncode != 0

    try:
        wait_until(allowed, min(5.0, max(0.0, deadline - time.monotonic())), "logins", interval=0.2,
                   error=HostError)
    except HostError:
        host.run("systemctl", "restart", "systemd-user-sessions.service")
        wait_until(allowed, max(1.0, deadline - time.monotonic()),
                   lambda: f"{host.name} to allow logins ({NOLOGIN} is still there)\n{host.boot_log_tail()}",
                   interval=0.2, error=HostError)


def _write_client_files(state_dir: Path, hosts: list[Host], public_keys: dict[str, str]) -> None:
    known_hosts = state_dir / "known_hosts"
    known_hosts.write_text("".join(f"{name} {key}\n" for name, key in public_keys.items()), encoding="utf-8")
    config = "".join(SSH_CLIENT_HOST.format(name=h.name, port=h.port) for h in hosts)
    config += SSH_CLIENT_COMMON.format(user=rootfs.LOGIN_USER, identity=state_dir / "id_ed25519",
                                       known_hosts=known_hosts)
    (state_dir / "ssh_config").write_text(config, encoding="utf-8")


# Each host's systemd, journald, logind and dbus hold inotify instances, counted against root's one limit with
# the controller's own: Debian's default 128 runs out near 20 hosts ("Too many open files", failed units).
INOTIFY_INSTANCES_PER_HOST = 16
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def _running_hosts() -> int:
    """Hosts of any run still up on this machine (the lifecycle registry), whose instances count against the limit."""
    return sum(1 for _path, record in lifecycle.registered()
               if record.get("kind") == "host" and lifecycle.pid_alive(record["pid"]))


def _ensure_inotify_room(new_hosts: int) -> None:
    """Raise root's inotify instance limit (machine-wide, until reboot) when NEW_HOSTS more hosts would exhaust it."""
    wanted = 128 + INOTIFY_INSTANCES_PER_HOST * (_running_hosts() + new_hosts)
    if int(INOTIFY_LIMIT.read_text(encoding="utf-8")) < wanted:
        INOTIFY_LIMIT.write_text(str(wanted), encoding="utf-8")


def _named(name: str) -> tuple[str, str]:
    """``NAME`` or ``NAME:SUITE`` -> (name, suite)."""
    host, dummy, suite = name.partition(":")
    suite = suite or rootfs.BOOKWORM.suite
    if suite not in rootfs.RELEASES:
        raise HostError(f"{name}: no host release {suite} (known: {', '.join(rootfs.RELEASES)})")
    return host, suite


def up(state_dir: Path, names: list[str]) -> dict:
    """Boot one host per name (``NAME``, or ``NAME:bullseye`` for Debian 11); returns (and writes) hosts.json."""
    named = [_named(name) for name in names]
    # Debian 12's tree always: a Debian 11 host's units run from it.
    trees = {suite: rootfs.ensure_rootfs(rootfs.RELEASES[suite])
             for suite in {rootfs.BOOKWORM.suite} | {suite for dummy, suite in named}}
    _ensure_inotify_room(len(names))
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    identity = state_dir / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "awa-testbed", "-f", str(identity)],
                   check=True)
    client_key = identity.with_suffix(".pub").read_text(encoding="utf-8").strip()
    token = secrets.token_hex(3)
    hosts = [Host(name, f"awa-{token}-{index}", free_port(), str(state_dir / name), suite=suite, pid_base=base)
             for index, ((name, suite), base) in enumerate(zip(named, pid_bases(len(named))), start=1)]
    started = time.monotonic()
    try:
        public_keys = {host.name: _prepare_layer(host, trees[host.suite], client_key) for host in hosts}
        for host in hosts:
            _boot(host, trees)
        # Written now, so that ``down`` finds the containers even if the boot does not finish.
        _describe(state_dir, trees, hosts)
        deadline = time.monotonic() + BOOT_TIMEOUT
        for host in hosts:
            _wait_booted(host, deadline)
    except BaseException:
        _stop(hosts)
        raise
    _write_client_files(state_dir, hosts, public_keys)
    return _describe(state_dir, trees, hosts, boot_seconds=round(time.monotonic() - started, 1))


def _describe(state_dir: Path, trees: dict[str, Path], hosts: list[Host], **extra) -> dict:
    description = {"rootfs": {suite: str(tree) for suite, tree in trees.items()}, "user": rootfs.LOGIN_USER,
                   "ssh_config": str(state_dir / "ssh_config"), **extra,
                   "hosts": {host.name: asdict(host) for host in hosts}}
    (state_dir / "hosts.json").write_text(json.dumps(description, indent=2), encoding="utf-8")
    return description


def _stop(hosts: list[Host]) -> None:
    """Power every container off (all at once), then delete their layers."""
    running = [host for host in hosts if host.nspawn_pid and lifecycle.pid_alive(host.nspawn_pid)]
    for host in running:
        # systemd-nspawn turns SIGTERM into a clean poweroff of the container.
        os.kill(host.nspawn_pid, signal.SIGTERM)
    for host in running:
        if not lifecycle.wait_pid_gone(host.nspawn_pid, 30):
            lifecycle.terminate_pid(host.nspawn_pid, signal.SIGKILL)
    for host in hosts:
        lifecycle.unregister("host", host.machine)
        shutil.rmtree(host.folder, ignore_errors=True)


def _one(state_dir: Path, name: str) -> tuple[list[Host], Host]:
    hosts = load(state_dir)
    found = [host for host in hosts if host.name == name]
    if not found:
        raise HostError(f"no host {name} in {state_dir / 'hosts.json'} (hosts: {', '.join(h.name for h in hosts)})")
    return hosts, found[0]


def power_off(state_dir: Path, name: str) -> None:
    """Cut the host's power: its processes die at once (no shutdown), so it vanishes as a host that fails does.

    Its layer is kept, so ``power_on`` boots it again as it was.
    """
    dummy, host = _one(state_dir, name)
    if host.nspawn_pid and lifecycle.pid_alive(host.nspawn_pid):
        # SIGKILL to the container's PID 1 ends its whole PID namespace at once; systemd-nspawn then exits.
        leader = host.leader_pid()
        os.kill(leader or host.nspawn_pid, signal.SIGKILL)
        if not lifecycle.wait_pid_gone(host.nspawn_pid, 30):
            raise HostError(f"{name}: systemd-nspawn (pid {host.nspawn_pid}) is still running after SIGKILL")


def power_on(state_dir: Path, name: str) -> None:
    """Boot a host that ``power_off`` cut, from its kept layer (its enabled units start at boot)."""
    hosts, host = _one(state_dir, name)
    if host.nspawn_pid and lifecycle.pid_alive(host.nspawn_pid):
        raise HostError(f"{name} is already running (systemd-nspawn pid {host.nspawn_pid})")
    description = json.loads((state_dir / "hosts.json").read_text(encoding="utf-8"))
    trees = {suite: Path(tree) for suite, tree in description["rootfs"].items()}
    # A cut leaves the overlay's work folder as it was; overlayfs wants it empty.
    shutil.rmtree(Path(host.folder) / "work", ignore_errors=True)
    (Path(host.folder) / "work").mkdir()
    _boot(host, trees)
    _wait_booted(host, time.monotonic() + BOOT_TIMEOUT)
    description["hosts"][name] = asdict(host)
    (state_dir / "hosts.json").write_text(json.dumps(description, indent=2), encoding="utf-8")


def load(state_dir: Path) -> list[Host]:
    description = json.loads((state_dir / "hosts.json").read_text(encoding="utf-8"))
    return [Host(**host) for host in description["hosts"].values()]


def down(state_dir: Path) -> None:
    """Shut every host of ``up`` down and delete the state folder."""
    if (state_dir / "hosts.json").exists():
        _stop(load(state_dir))
    shutil.rmtree(state_dir, ignore_errors=True)
