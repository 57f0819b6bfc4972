# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which shard count a queue should have, and why in words: the rule (rule.py's docstring) applied to one queue's
load - its verdict, its message, its ordering consequence, its findings. Pure.

    advised = advise(rule.queue_load(queue, physical, shards, sampled), sampled.tally, measured)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.advice import rule
from ansible_collections.awa.operations.plugins.module_utils.advice.contention import ContentionTally
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice

# Why lane contention outlasts more shards, by what the benchmark saw take over at the largest count.
PAST_THE_LANE_LOCK = {
    rule.COPY_LANES_LIMIT: "each enqueue_many_copy call reserves and locks every lane it writes and holds the locks "
                           "until it commits: without an ordering_key every call writes shard 0, and with keys a call "
                           "writes up to S lanes, so more shards add work to every call while the calls still queue on "
                           "the lane locks",
    rule.CPU_LIMIT: "past the lane lock, the enqueuers run on CPU",
}

# What each limit other than the lanes means, when the lanes were not contended.
OTHER_LIMITS = {
    rule.NOTIFY_LIMIT: "commits waited on the NOTIFY lock, which every shard shares",
    rule.WAL_LIMIT: "commits waited on the WAL flush, which every shard shares",
    rule.CPU_LIMIT: "the enqueuers ran on CPU, not waiting on a lock that shards would split",
    rule.CLAIMERS_LIMIT: "the backlog grew by {lag_growth} while claims lagged: add workers or slots; more shards "
                         "make each claim scan more lanes",
}
HIDDEN_BACKENDS = ("Some backends' wait events and statements were hidden from this role: grant it pg_monitor "
                   "(pg_read_all_stats) so the advice sees what every enqueuer waits on.")


def ordering_consequence(shards: int, to: int) -> str:
    if to == shards:
        return f"Nothing changes: jobs keep their order per shard over {shards} shard(s)."
    if to > shards:
        return (f"Raising {shards} -> {to}: ordering_key routing moves from hash mod {shards} to hash mod {to}, so "
                "per-key FIFO does not hold between jobs enqueued before and after the change while the older ones "
                f"remain; jobs without a key are ordered per shard only; every claim scans {to} lanes per priority.")
    return (f"Lowering {shards} -> {to}: new jobs go to {to} shard(s) and keys remap (hash mod {to}); wait until the "
            f"shards {to} and above have drained (wait: drained) before relying on their order again.")


def advise(load: rule.QueueLoad, tally: ContentionTally, measured: Mapping[str, Any]) -> Advice:
    """The advice for one queue, by the rule's branches in their order: verdict, target count, limit, why, the
    evidence used, the ordering consequence and the findings."""
    total, busiest = sum(load.enqueued.values()), max(load.enqueued.values(), default=0)
    shards, waiters = load.shards, load.lane_waiters
    path = rule.enqueue_path(tally, load)
    concurrency = rule.observed_load(tally, load)
    row = rule.measured_row(measured.get("gains", {}).get(path, {}), concurrency)
    evidence = rule.evidence(load, tally, path, concurrency, row)
    findings = [HIDDEN_BACKENDS] if tally.hidden else []

    def advice(verdict: str, to: int, why: str, limit: str | None = None) -> Advice:
        said = {"raise": f"raise enqueue_shards {shards} -> {to}", "keep": f"keep enqueue_shards {shards}",
                "lower": f"lower enqueue_shards {shards} -> {to} (after a drain)",
                "will_not_help": f"sharding will not help: the limit is {limit}"}[verdict]
        return {"verdict": verdict, "shards": shards, "to": to, "limit": limit, "evidence": evidence,
                "message": f"{load.queue}: {said}. {why}", "ordering": ordering_consequence(shards, to),
                "findings": findings}

    if total == 0 and waiters == 0:
        return advice("keep", shards, "No job was enqueued in the window: nothing to judge; advise again under the "
                                      "load that matters.")
    if shards > 1 and total >= rule.MIN_JOBS and busiest / total >= rule.ONE_SHARD:
        findings.append(
            f"{load.queue}: {busiest} of {total} jobs in the window went to shard "
            f"{max(load.enqueued, key=lambda shard: load.enqueued[shard])} of {shards}. Producers that send everything "
            "to one shard do so whatever the count is: Awa's Python enqueue_many_copy without an ordering_key always "
            "writes shard 0 (a new store per call), and the SQL path picks pg_backend_pid() % S, one shard per "
            "connection. Give those jobs an ordering_key, or insert them one at a time, to spread them.")
        return advice("keep", shards, "More shards would not spread these producers; see the finding.")
    if waiters >= rule.CONTENDED:
        if row is None:
            return advice("keep", shards, f"The lanes are contended, but the gains table has no measurement of the "
                                          f"{path} path to judge a change by.")
        producers, gains = row
        target = rule.raise_target(gains, shards)
        if target is not None:
            keyed_only = (" The copy producers spread over shards only with an ordering_key on their jobs."
                          if path == "copy_keyed" else "")
            gain = gains[target] / rule.gain_at(gains, shards)
            return advice("raise", target, f"{waiters} enqueuers per sample waited on its lane locks; with {producers} "
                          f"producer(s) on the {path} path the benchmark measured x{gain:.2f} at {target} shards over "
                          f"{shards}.{keyed_only}")
        limits = {int(n): limit for n, limit in measured.get("limits", {}).get(path, {}).items()}
        limit = rule.commit_limit(tally) or limits.get(producers) or rule.NOTIFY_LIMIT
        past = PAST_THE_LANE_LOCK.get(limit, "past the lane lock, commits serialize")
        return advice("will_not_help", shards, f"{waiters} enqueuers per sample waited on its lane locks, but with "
                      f"{producers} producer(s) on the {path} path no count measured x{rule.MIN_GAIN} over {shards}: "
                      f"{past}.", limit)
    lag_growth = evidence["lag_growth"]
    other = rule.commit_limit(tally)
    if other is None and tally.enqueuers_active and rule.on_cpu(tally) >= rule.CPU_BOUND:
        other = rule.CPU_LIMIT
    if other is None and lag_growth is not None and lag_growth > max(rule.MIN_JOBS, rule.BACKLOG_GROWTH * total):
        other = rule.CLAIMERS_LIMIT
    if other is not None:
        return advice("will_not_help", shards, f"The lanes were not contended ({waiters} waiters per sample); "
                      f"{OTHER_LIMITS[other].format(lag_growth=lag_growth)}.", other)
    if shards > 1 and waiters < rule.QUIET and row is not None:
        target = rule.lower_target(row[1], shards)
        if target is not None:
            return advice("lower", target, f"Its lanes were quiet ({waiters} waiters per sample) and with {row[0]} "
                          f"producer(s) on the {path} path the benchmark measured less than x{rule.MIN_GAIN} for "
                          f"{shards} shards over {target}.")
    return advice("keep", shards, f"The lanes were not contended ({waiters} waiters per sample) and nothing else "
                                  "limited the enqueues in the window.")
