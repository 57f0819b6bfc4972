# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the advice says: rule.py's decision in words - its message, its ordering consequence, its findings. Pure.

    advised = advise(rule.queue_load(queue, physical, shards, sampled), sampled.tally, measured)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.awa.operations.plugins.module_utils.advice import rule
from ansible_collections.awa.operations.plugins.module_utils.advice.rule import (
    CLAIMERS_LIMIT,
    COPY_LANES_LIMIT,
    CPU_LIMIT,
    MIN_GAIN,
    NOTIFY_LIMIT,
    WAL_LIMIT,
    Decision,
)
from ansible_collections.awa.operations.plugins.module_utils.advice.contention import ContentionTally
from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice, AdviceEvidence

# Why lane contention outlasts more shards, by what the benchmark saw take over at the largest count.
PAST_THE_LANE_LOCK = {
    COPY_LANES_LIMIT: "each enqueue_many_copy call reserves and locks every lane it writes and holds the locks until "
                      "it commits: without an ordering_key every call writes shard 0, and with keys a call writes up "
                      "to S lanes, so more shards add work to every call while the calls still queue on the lane "
                      "locks",
    CPU_LIMIT: "past the lane lock, the enqueuers run on CPU",
}

# What each limit other than the lanes means, when the lanes were not contended.
OTHER_LIMITS = {
    NOTIFY_LIMIT: "commits waited on the NOTIFY lock, which every shard shares",
    WAL_LIMIT: "commits waited on the WAL flush, which every shard shares",
    CPU_LIMIT: "the enqueuers ran on CPU, not waiting on a lock that shards would split",
    CLAIMERS_LIMIT: "the backlog grew by {lag_growth} while claims lagged: add workers or slots; more shards make each "
                    "claim scan more lanes",
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


def _why(decision: Decision) -> str:
    """Why the rule decided so, from the numbers it decided on."""
    facts = decision.facts
    waiters, path, shards = facts["waiters"], facts["path"], decision.shards
    if decision.reason == rule.NOTHING_ENQUEUED:
        return "No job was enqueued in the window: nothing to judge; advise again under the load that matters."
    if decision.reason == rule.ONE_SHARD_PRODUCERS:
        return "More shards would not spread these producers; see the finding."
    if decision.reason == rule.UNMEASURED:
        return f"The lanes are contended, but the gains table has no measurement of the {path} path to judge a change by."
    if decision.reason == rule.MEASURED_GAIN:
        keyed_only = (" The copy producers spread over shards only with an ordering_key on their jobs."
                      if path == "copy_keyed" else "")
        return (f"{waiters} enqueuers per sample waited on its lane locks; with {facts['producers']} producer(s) on the "
                f"{path} path the benchmark measured x{facts['gain']:.2f} at {decision.to} shards over {shards}."
                f"{keyed_only}")
    if decision.reason == rule.NO_MEASURED_GAIN:
        past = PAST_THE_LANE_LOCK.get(decision.limit or "", "past the lane lock, commits serialize")
        return (f"{waiters} enqueuers per sample waited on its lane locks, but with {facts['producers']} producer(s) on "
                f"the {path} path no count measured x{MIN_GAIN} over {shards}: {past}.")
    if decision.reason == rule.OTHER_LIMIT:
        why = OTHER_LIMITS[decision.limit or ""].format(lag_growth=facts["lag_growth"])
        return f"The lanes were not contended ({waiters} waiters per sample); {why}."
    if decision.reason == rule.QUIET_LANES:
        return (f"Its lanes were quiet ({waiters} waiters per sample) and with {facts['producers']} producer(s) on the "
                f"{path} path the benchmark measured less than x{MIN_GAIN} for {shards} shards over {decision.to}.")
    return (f"The lanes were not contended ({waiters} waiters per sample) and nothing else limited the enqueues in the "
            "window.")


def _verdict_words(decision: Decision) -> str:
    return {"raise": f"raise enqueue_shards {decision.shards} -> {decision.to}",
            "lower": f"lower enqueue_shards {decision.shards} -> {decision.to} (after a drain)",
            "keep": f"keep enqueue_shards {decision.shards}",
            "will_not_help": f"sharding will not help: the limit is {decision.limit}"}[decision.verdict]


def _findings(queue: str, decision: Decision, evidence: AdviceEvidence) -> list[str]:
    findings = [HIDDEN_BACKENDS] if evidence["hidden_backend_samples"] else []
    if decision.reason == rule.ONE_SHARD_PRODUCERS:
        facts = decision.facts
        findings.append(
            f"{queue}: {facts['busiest']} of {facts['total']} jobs in the window went to shard {facts['shard']} of "
            f"{decision.shards}. Producers that send everything to one shard do so whatever the count is: Awa's Python "
            "enqueue_many_copy without an ordering_key always writes shard 0 (a new store per call), and the SQL path "
            "picks pg_backend_pid() % S, one shard per connection. Give those jobs an ordering_key, or insert them one "
            "at a time, to spread them.")
    return findings


def described(queue: str, decision: Decision, evidence: AdviceEvidence) -> Advice:
    """The advice for one queue: the decision, the evidence it used, and what both mean in words."""
    return {"verdict": decision.verdict, "shards": decision.shards, "to": decision.to, "limit": decision.limit,
            "message": f"{queue}: {_verdict_words(decision)}. {_why(decision)}", "evidence": evidence,
            "ordering": ordering_consequence(decision.shards, decision.to),
            "findings": _findings(queue, decision, evidence)}


def advise(load: rule.QueueLoad, tally: ContentionTally, measured: Mapping[str, Any]) -> Advice:
    """The advice for one queue: verdict, target count, limit, the evidence used, and the ordering consequence."""
    decision, evidence = rule.decide(load, tally, measured)
    return described(load.queue, decision, evidence)
