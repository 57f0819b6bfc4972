# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Awa runtimes a producer service runs: the one rule of the rollout's waits (here, on the module's side)
and of its verdicts (plugin_utils/rollout/match.py, on the controller's).

An Awa 0.6.9 runtime reports its pid in its own pid namespace (1 in a
container) and the HOSTNAME of its environment (none unless something sets
it), by the clock of the host it runs on. The producer host reads the same
of every process of a service (producer/identities.py: a unit's control
group, or a main pid and its descendants; and the replicas a status command
prints): its ``reports_as``. A runtime is a service's when its pid and host
name are one of those (an identity without a pid matches any pid; one whose
host name could not be read, any host name), and it started no earlier than
the service's process (the same host's clock; systemd's start is whole
seconds). A service that reports nothing has no runtime by this rule: its
runtimes are counted instead.

Two services may report the same identity (hosts booted from one image with
no HOSTNAME set, containers given one HOSTNAME): each runtime a service
expects takes a runtime of its own (``assign``), so one identity counts as
many times as services expect it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypedDict

from ansible_collections.awa.operations.plugins.module_utils.info.result import RuntimeView

# systemd's start timestamps are whole seconds.
CLOCK_RESOLUTION = 1.0


class ServiceProcess(TypedDict):
    """A producer service's current processes, as its host reported them."""

    # What they report as a runtime's identity: {"pid": int | None, "hostname": str | None}, no hostname key where
    # their environment could not be read (any host name).
    reports_as: list[dict[str, Any]]
    # Unix seconds by its host's clock; None when unknown.
    started_at: float | None


class RestartedService(ServiceProcess):
    """A service a batch restarted, and how many runtimes it runs."""

    runtimes: int


class WindowService(ServiceProcess):
    """A producer service of the change window, and whether the change concerns it."""

    concerned: bool


def is_runtime_of(service: ServiceProcess, pid: int, hostname: str | None, started_at: float | None) -> bool:
    """Whether the runtime of ``pid``, ``hostname`` and ``started_at`` (unix seconds) is ``service``'s."""
    started = service["started_at"]
    if started is not None and started_at is not None and started_at < started - CLOCK_RESOLUTION:
        return False
    return any(reported.get("pid") in (None, pid) and reported.get("hostname", hostname) == hostname
               for reported in service["reports_as"])


def identity(runtime: RuntimeView) -> tuple[int, str | None, float | None]:
    """What the rule reads of a runtime as a read returns it: its pid, host name and start (unix seconds)."""
    return runtime["pid"], runtime["hostname"], datetime.datetime.fromisoformat(runtime["started_at"]).timestamp()


def is_runtime_view_of(service: ServiceProcess, runtime: RuntimeView) -> bool:
    """``is_runtime_of`` for a runtime as a read returns it."""
    return is_runtime_of(service, *identity(runtime))


def _owners(services: Sequence[ServiceProcess]) -> Callable[[int, str | None, float | None], list[int]]:
    """The positions in ``services`` of those a runtime of (pid, host name, start) is, looked up by pid: a poll of
    a thousand services and runtimes compares each runtime with the few services of its pid, not with all."""
    by_pid: dict[int | None, list[int]] = {}
    for position, service in enumerate(services):
        for pid in {reported.get("pid") for reported in service["reports_as"]}:
            by_pid.setdefault(pid, []).append(position)
    return lambda pid, hostname, started_at: [
        position for position in dict.fromkeys(by_pid.get(pid, []) + by_pid.get(None, []))
        if is_runtime_of(services[position], pid, hostname, started_at)]


def assign(services: Sequence[ServiceProcess], runtimes: Sequence[RuntimeView]) -> dict[str, int]:
    """Runtime instance id -> the index of the service it is given to, each runtime to one service, as many
    services served as can be (a maximum matching: a runtime that could be two services' never leaves one of them
    without the other runtime it could have had)."""
    owners_of = _owners(services)
    candidates: list[list[str]] = [[] for dummy in services]
    for runtime in runtimes:
        for position in owners_of(*identity(runtime)):
            candidates[position].append(runtime["instance_id"])
    owner: dict[str, int] = {}
    for first in range(len(services)):
        # An augmenting path from ``first``, searched depth first without recursion.
        seen: set[str] = set()
        path: list[tuple[int, str]] = []
        stack = [(first, iter(candidates[first]))]
        while stack:
            service, options = stack[-1]
            tried = next((option for option in options if option not in seen), None)
            if tried is None:
                stack.pop()
                if path:
                    path.pop()
                continue
            seen.add(tried)
            path.append((service, tried))
            if tried not in owner:
                for taker, taken in path:
                    owner[taken] = taker
                break
            stack.append((owner[tried], iter(candidates[owner[tried]])))
    return owner


def restarted_runtimes(services: Sequence[RestartedService], new: Sequence[RuntimeView], *,
                       counted: bool) -> list[RuntimeView]:
    """Of the ``new`` runtimes (live, healthy, not seen before the restart), those of the restarted ``services`` -
    at most as many as each runs - and, when ``counted``, every one that is none of theirs (the runtimes of
    services that report nothing are counted, not told apart)."""
    slots = [service for service in services for dummy in range(service["runtimes"])]
    given, owners_of = assign(slots, new), _owners(services)
    return [runtime for runtime in new if runtime["instance_id"] in given
            or counted and not owners_of(*identity(runtime))]


def left_out(window: Sequence[WindowService],
             runtimes: Iterable[tuple[str, int, str | None, float | None]]) -> set[str]:
    """The instance ids, of ``runtimes`` (instance id, pid, host name, start), that a change window does not wait
    for: those of the services the change does not concern and - where every service of the window reports what
    its runtimes are - those of none of its services (outside the window: another window's, a producer outside the
    inventory). Without a window (empty), none."""
    owners_of = _owners(window)
    told_apart = bool(window) and all(service["reports_as"] for service in window)
    return {instance_id for instance_id, pid, hostname, started_at in runtimes
            if not (owners := owners_of(pid, hostname, started_at)) and told_apart
            or owners and not any(window[position]["concerned"] for position in owners)}
