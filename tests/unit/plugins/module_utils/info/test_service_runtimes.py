# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which runtimes a producer service runs: the rule of the rollout's waits and verdicts, and what a batch's wait and
a window's waits count by it."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.info.service_runtimes import (
    assign,
    is_runtime_of,
    left_out,
    restarted_runtimes,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import runtime

T = 1764520000.0


def service(pid, hostname=None, started=T, runtimes=1, concerned=True, **reported) -> dict:
    """A service whose process ``pid`` reports ``hostname`` (``reported``: what else it reports; no pid: nothing)."""
    identity = {"pid": pid, "hostname": hostname, **reported}
    return {"reports_as": [identity] if pid is not None else [], "started_at": started, "runtimes": runtimes,
            "concerned": concerned}


def identities(*views: dict) -> list[tuple]:
    return [(view["instance_id"], view["pid"], view["hostname"], T + 1) for view in views]


def test_a_runtime_is_a_service_s_by_its_pid_and_host_name_as_its_processes_report_them_and_a_start_no_earlier():
    app1 = service(11, "app1")
    assert is_runtime_of(app1, 11, "app1", T + 0.2)
    assert is_runtime_of(app1, 11, "app1", T - 0.5), "systemd's start is whole seconds"
    assert not is_runtime_of(app1, 12, "app1", T + 1)
    assert not is_runtime_of(app1, 11, "app2", T + 1), "another host's runtime with the same pid"
    assert not is_runtime_of(app1, 11, None, T + 1), "a runtime without the HOSTNAME its process has"
    assert not is_runtime_of(app1, 11, "app1", T - 30), "the pid used again: an older process's runtime"
    assert not is_runtime_of(service(None), 0, None, T), "a service that reports nothing has no runtime by pid"
    # A process whose environment could not be read: any host name; a replica its status command names: any pid.
    unread = {"reports_as": [{"pid": 11}], "started_at": T}
    assert is_runtime_of(unread, 11, "app9", T + 1) and not is_runtime_of(unread, 12, None, T + 1)
    pod = {"reports_as": [{"pid": None, "hostname": "api-7d9f-x2"}], "started_at": None}
    assert is_runtime_of(pod, 1, "api-7d9f-x2", T + 1) and not is_runtime_of(pod, 1, "api-7d9f-y3", T + 1)


def test_services_that_share_a_pid_each_get_a_runtime_of_their_own():
    # Identical hosts restarted together: pid 7 on app1 and app2, one of them with HOSTNAME unread (any host name).
    first, second = {"reports_as": [{"pid": 7}], "started_at": T}, service(7)
    unnamed, named = runtime(7, T + 1, instance="unnamed"), runtime(7, T + 1, hostname="app1", instance="named")
    # Giving the unnamed runtime to app1 first would leave app2 without one: each gets the one it can have.
    assert assign([first, second], [unnamed, named]) == {"named": 0, "unnamed": 1}
    assert assign([first, second], [unnamed]) == {"unnamed": 0}
    assert assign([first, first], [unnamed]) == {"unnamed": 0}, "a runtime counts once"


def test_a_batch_s_wait_counts_the_runtimes_of_its_own_services_and_nothing_else():
    restarted = [service(11, runtimes=2), service(12)]
    # app1's service runs two runtimes; a third with its pid is one more than it counts for.
    new = [runtime(11, T + 1, instance="a1"), runtime(11, T + 1, instance="a2"), runtime(44, T + 1, instance="other"),
           runtime(11, T + 1, instance="a3"), runtime(12, T + 1, instance="b")]
    assert [view["instance_id"] for view in restarted_runtimes(restarted, new, counted=False)] == ["a1", "a2", "b"]
    # Where some restarted services are counted, every runtime none of them runs counts for those.
    assert [view["instance_id"] for view in restarted_runtimes(restarted, new, counted=True)] == [
        "a1", "a2", "other", "b"]
    # A read that names no restarted service (the public module's) lists every new runtime.
    assert len(restarted_runtimes([], new, counted=True)) == 5


def test_a_window_leaves_out_the_runtimes_of_the_services_it_does_not_concern_and_those_outside_it():
    window = [service(11), service(12, concerned=False)]
    own, untouched, outside = runtime(11, T + 1), runtime(12, T + 1), runtime(44, T + 1)
    assert left_out(window, identities(own, untouched, outside)) == {untouched["instance_id"], outside["instance_id"]}
    # A service that reports nothing (judged by count): outside runtimes cannot be told from its own.
    counted = window + [service(None)]
    assert left_out(counted, identities(own, untouched, outside)) == {untouched["instance_id"]}
    # No window (the wait entry point, the public module): every runtime is waited for.
    assert left_out([], identities(own, untouched, outside)) == set()
