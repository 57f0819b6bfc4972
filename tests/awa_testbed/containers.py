"""``python -m awa_testbed.containers``: a service whose program runs in containers, as a container engine runs it.

    python -m awa_testbed.containers --hostname TEMPLATE [--replicas N] -- ARGV...

Each container is ARGV as pid 1 of a pid namespace of its own (``unshare
--pid --fork --mount-proc``), with ``HOSTNAME`` set to a new container id at
every start, as Docker and Podman set it: TEMPLATE with ``{id}`` (12 random
hex digits) and ``{replica}`` (1 to N) filled in. ``{hostname}`` in ARGV
becomes that hostname: a worker's ``--name``, so that its records tell its
starts apart (its pid is 1 at every start).

One container: this process becomes its ``unshare``, the service's main pid,
as ``podman run`` is its unit's. unshare blocks SIGTERM, so the service
manager sends its stop signal to the process group (supervisord's
``stopasgroup``), where the runtime gets it.

Several (``--replicas N``, a service of N replicas restarted together): this
process runs them, each in a process group of its own, and passes SIGTERM and
SIGINT on to each. When one ends by itself, it stops the others and exits 1,
so that the service manager restarts the whole service. A replica dies with
this process (SIGKILL: ``PR_SET_PDEATHSIG``), its runtime with its unshare
(``--kill-child``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys

from . import lifecycle

# What every replica of a several-replica service exits with when one of them ended by itself: not 0, which
# supervisord (exitcodes=0, autorestart=unexpected) and systemd (Restart=on-failure) take for a wanted stop.
REPLICA_ENDED = 1


def container_argv(hostname: str, argv: list[str]) -> list[str]:
    """ARGV as pid 1 of a pid and mount namespace of its own, with HOSTNAME (only there: not in unshare's
    environment), ended with SIGKILL when its unshare ends."""
    return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "env", f"HOSTNAME={hostname}",
            *(item.replace("{hostname}", hostname) for item in argv)]


def new_hostname(template: str, replica: int) -> str:
    return template.format(id=secrets.token_hex(6), replica=replica)


def run_replicas(commands: list[list[str]]) -> int:
    """Run each command in a process group of its own until one ends; then the others are stopped too."""
    replicas: list[subprocess.Popen] = []
    stopping: list[int] = []

    def stop(signum: int = signal.SIGTERM, dummy_frame: object = None) -> None:
        stopping.append(signum)
        for replica in replicas:
            try:
                os.killpg(replica.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    for command in commands:
        replicas.append(subprocess.Popen(  # pylint: disable=consider-using-with
            command, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=lifecycle.die_with_parent(signal.SIGKILL)))  # pylint: disable=subprocess-popen-preexec-fn
    if stopping:
        stop()  # a stop signal came while the replicas started: the later ones get it too
    ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # the first to end, left for Popen to reap
    ended_itself = not stopping
    if ended_itself:
        print(f"containers: replica pid {ended.si_pid} ended (status {ended.si_status}); stopping the others",
              flush=True)
        stop()
    for replica in replicas:
        replica.wait()
    return REPLICA_ENDED if ended_itself else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m awa_testbed.containers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hostname", required=True, help="each container's HOSTNAME: {id} and {replica} filled in")
    parser.add_argument("--replicas", type=int, default=1, help="containers run and restarted together")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- and the command each container runs")
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command or args.replicas < 1:
        parser.error("give at least one replica and the command after --")
    if args.replicas == 1:
        os.execvp("unshare", container_argv(new_hostname(args.hostname, 1), command))
    return run_replicas([container_argv(new_hostname(args.hostname, replica), command)
                         for replica in range(1, args.replicas + 1)])


if __name__ == "__main__":
    sys.exit(main())
