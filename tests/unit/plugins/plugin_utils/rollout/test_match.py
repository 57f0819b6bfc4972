# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which live runtime belongs to which service, and the inventory's N of M."""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.plugin_utils.rollout.match import (
    BY_COUNT,
    BY_PID,
    COVERED_BY_COUNT,
    HAS_RUNTIMES,
    NO_RUNTIME,
    NOT_READ,
    SHORT_BY_COUNT,
    how_judged,
    inventory_text,
    match,
)
from ansible_collections.awa.operations.tests.unit.plugins.plugin_utils.rollout_fakes import runtime, systemd_host, unit

T = 1764520000.0


def statuses(matched: dict) -> dict[str, tuple[str, str]]:
    return {f"{e['host']}/{e['service']}": (e["status"], e["judged_by"]) for e in matched["services"]}


def test_each_service_gets_the_runtime_of_its_main_pid_and_the_rest_are_outside():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11), "b": unit("b", started=T, pid=12)}),
             systemd_host("f2", {"c": unit("c", state="inactive", sub="dead", pid=0)})]
    matched = match(hosts, [runtime(11, T + 1), runtime(13, T + 1), runtime(12, T + 1, live=False)])
    assert statuses(matched) == {"f1/a": (HAS_RUNTIMES, BY_PID), "f1/b": (NO_RUNTIME, BY_PID),
                                 "f2/c": ("not_running", BY_COUNT)}
    # The stopped service is not expected; the stale runtime does not count; pid 13 runs outside the inventory.
    assert (matched["expected"], matched["on_count"], matched["outside"]) == (2, 1, 1)
    assert inventory_text(matched) == "1 of 2, 1 outside"
    # Every service that runs is told apart by pid: pid 13's runtime is named as outside.
    assert matched["outside_runtimes"] == [runtime(13, T + 1)["instance_id"]]


def test_runtimes_are_named_outside_only_where_every_running_service_is_told_apart_by_pid():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11)}), systemd_host("f2", {"c": unit("c", pid=21)})]
    runtimes = [runtime(11, T + 1), runtime(13, T + 1)]
    # f2's service has no runtime with its pid: judged by count, so pid 13 may be its runtime.
    assert match(hosts, runtimes)["outside_runtimes"] == []
    assert match(hosts, runtimes, pid_hosts=["f2"])["outside_runtimes"] == [runtime(13, T + 1)["instance_id"]]
    unreachable = [hosts[0], systemd_host("f3", {"d": unit("d")}, reachable=False)]
    assert match(unreachable, runtimes)["outside_runtimes"] == [], "the unreachable host's runtimes are unknown"


def test_a_runtime_on_an_older_count_does_not_count_and_per_queue_counts_read_pending_queues():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11), "b": unit("b", started=T, pid=12)})]
    runtimes = [runtime(11, T + 1), runtime(12, T + 1, converged=False, pending=["orders"])]
    assert match(hosts, runtimes)["on_count"] == 1
    assert match(hosts, runtimes, queue="demo")["on_count"] == 2
    assert match(hosts, runtimes, queue="orders")["on_count"] == 1


def test_unreachable_hosts_count_in_the_expectation_but_were_not_read():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11)}), systemd_host("f3", {"d": unit("d")}, reachable=False)]
    matched = match(hosts, [runtime(11, T + 1)])
    assert statuses(matched)["f3/d"] == (NOT_READ, BY_COUNT)
    assert (matched["expected"], matched["on_count"], matched["unreachable_hosts"]) == (2, 1, ["f3"])


def test_a_runtime_older_than_the_process_with_its_pid_is_not_that_process_s():
    # A pid used again: the runtime started before the process, so it is another's (here it still counts).
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11)})]
    assert statuses(match(hosts, [runtime(11, T - 30)]))["f1/a"] == (COVERED_BY_COUNT, BY_COUNT)


def test_hosts_matched_by_pid_before_stay_judged_by_pid():
    hosts = [systemd_host("f2", {"b": unit("b", started=T, pid=12)})]
    assert statuses(match(hosts, []))["f2/b"] == (SHORT_BY_COUNT, BY_COUNT)
    assert statuses(match(hosts, [], pid_hosts=["f2"]))["f2/b"] == (NO_RUNTIME, BY_PID)


def test_several_runtimes_per_service():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11)}, runtimes={"a": 2})]
    two = [runtime(11, T + 1, instance="x"), runtime(11, T + 1, instance="y")]
    assert statuses(match(hosts, two))["f1/a"][0] == HAS_RUNTIMES
    assert statuses(match(hosts, two[:1]))["f1/a"][0] == "stale_runtimes"
    assert match(hosts, two)["expected"] == 2


def test_how_the_count_was_judged_is_said():
    pid_only = match([systemd_host("f1", {"a": unit("a", started=T, pid=11)})], [runtime(11, T + 1)])
    assert how_judged(pid_only).startswith("runtimes matched to services by pid")
    counted = match([systemd_host("f1", {"a": unit("a", started=T, pid=11)})], [runtime(99, T + 1)])
    assert "except on f1" in how_judged(counted) and counted["on_count"] == 1 and counted["outside"] == 0


def test_many_hosts_judged_by_count_are_named_by_ranges_and_briefly_where_it_repeats():
    hosts = [systemd_host(f"web-{index:02d}", {"a": unit("a", started=T, pid=300)}) for index in range(1, 51)]
    matched = match(hosts, [runtime(300, T + 1, instance=f"i-{index}") for index in range(50)])
    assert how_judged(matched).startswith("runtimes matched to services by pid, except on web-01..web-50: a runtime "
                                          "there cannot be tied to one service by the pid and host name it reports")
    assert how_judged(matched, brief=True) == (
        "runtimes matched to services by pid, except on web-01..web-50, whose services were judged by count (their "
        "runtimes cannot be tied to one service by pid)")


def test_identical_hosts_restarted_together_share_pids_and_are_judged_by_count():
    # Hosts booted alike hand out the same pid in the same second; runtimes that report no host name could be
    # either host's, so neither host claims one: both are judged by count, which the live runtimes cover.
    hosts = [systemd_host(name, {"a": unit("a", started=T, pid=300), "b": unit("b", started=T, pid=301)})
             for name in ("f1", "f2")]
    runtimes = [runtime(pid, T + 1, instance=f"{host}-{pid}") for host in ("f1", "f2") for pid in (300, 301)]
    matched = match(hosts, runtimes)
    assert set(statuses(matched).values()) == {(COVERED_BY_COUNT, BY_COUNT)}
    assert (matched["expected"], matched["on_count"], matched["outside"]) == (4, 4, 0)
    assert ("or a runtime that reports no host name, or one HOSTNAME, has the pid of services on several hosts: set "
            "enqueue_shards_runtime_hostname") in how_judged(matched)
    # One of them gone: the count no longer covers the four services.
    assert set(statuses(match(hosts, runtimes[1:])).values()) == {(SHORT_BY_COUNT, BY_COUNT)}


def test_runtimes_that_report_their_host_name_are_matched_by_pid_across_hosts_sharing_pids():
    # Each host's environment file sets HOSTNAME (enqueue_shards_runtime_hostname): its process carries it.
    hosts = [systemd_host(name, {"a": unit("a", started=T, pid=300, hostname=name)}) for name in ("f1", "f2")]
    matched = match(hosts, [runtime(300, T + 1, hostname="f1", instance="one")])
    assert statuses(matched) == {"f1/a": (HAS_RUNTIMES, BY_PID), "f2/a": (SHORT_BY_COUNT, BY_COUNT)}
    both = match(hosts, [runtime(300, T + 1, hostname=name, instance=name) for name in ("f1", "f2")])
    assert set(statuses(both).values()) == {(HAS_RUNTIMES, BY_PID)} and both["outside"] == 0
    # A runtime that names another host than its process's HOSTNAME is not that process's.
    stranger = match(hosts[:1], [runtime(300, T + 1, hostname="f2")], pid_hosts=["f1"])
    assert statuses(stranger)["f1/a"] == (NO_RUNTIME, BY_PID) and stranger["outside"] == 1


def test_a_container_s_runtime_is_pid_1_of_its_namespace_tied_by_the_host_name_its_engine_set():
    # What a podman run unit's processes report (producer/identities.py: the container's pid 1 and its HOSTNAME).
    hosts = [systemd_host("f1", {name: unit(name, started=T, pid=pid) for name, pid in (("a", 400), ("b", 401))})]
    for host in hosts:
        for service, container in zip(host["services"], ("ctr-a1", "ctr-b1")):
            service["reports_as"] = [{"pid": service["main_pid"], "hostname": None}, {"pid": 1, "hostname": container}]
    matched = match(hosts, [runtime(1, T + 1, hostname="ctr-a1", instance="a"), runtime(1, T + 1, hostname="x")])
    assert statuses(matched) == {"f1/a": (HAS_RUNTIMES, BY_PID), "f1/b": (NO_RUNTIME, BY_PID)}
    assert matched["outside"] == 1


def test_a_runtime_two_services_could_claim_leaves_those_two_judged_by_count_not_their_neighbours():
    pids = {"a": 400, "b": 401, "c": 402}
    hosts = [systemd_host("f1", {name: unit(name, started=T, pid=pid) for name, pid in pids.items()})]
    for service in hosts[0]["services"][:2]:
        service["reports_as"] = [{"pid": 1, "hostname": "f1"}]
    matched = match(hosts, [runtime(1, T + 1, hostname="f1", instance="ab"), runtime(402, T + 1, instance="c")])
    assert statuses(matched) == {"f1/a": (SHORT_BY_COUNT, BY_COUNT), "f1/b": (SHORT_BY_COUNT, BY_COUNT),
                                 "f1/c": (HAS_RUNTIMES, BY_PID)}


def test_a_service_that_only_enqueues_expects_no_runtime_and_is_judged_by_its_start():
    hosts = [systemd_host("f1", {"a": unit("a", started=T, pid=11), "web": unit("web", started=T, pid=12)},
                          runtimes={"web": 0})]
    matched = match(hosts, [runtime(11, T + 1)])
    assert statuses(matched) == {"f1/a": (HAS_RUNTIMES, BY_PID), "f1/web": ("enqueue_only", "start")}
    assert (matched["expected"], matched["on_count"], matched["enqueue_only"]) == (1, 1, ["f1/web"])
    assert how_judged(matched).endswith("; judged by when they started, as they only enqueue: f1/web")
