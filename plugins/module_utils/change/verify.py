# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After provisioning, before the switch: does the database now hold what the plan predicted?"""

from __future__ import annotations

from ansible_collections.awa.operations.plugins.module_utils.errors import DatabaseError
from ansible_collections.awa.operations.plugins.module_utils.info.introspect.lanes import fetch_queue_state
from ansible_collections.awa.operations.plugins.module_utils.change.plan import Plan, queue_summary


def verify_provisioned(conn, plan: Plan, schema: str, runtime_roles: tuple[str, ...]) -> None:
    """Re-read inside the change's transaction: every planned lane and grant must now exist."""
    state = fetch_queue_state(conn, schema, plan.physical_queues, list(runtime_roles), shards=plan.shards)
    # The same summary the plan's before was made with, at the planned count.
    observed = {queue: queue_summary(state, queue, plan.shards) for queue in plan.physical_queues}
    if observed != plan.after:
        raise DatabaseError(
            f"After provisioning queue {plan.queue!r} the database does not match the plan "
            f"(expected {plan.after}, found {observed}); the transaction was rolled back and nothing changed.")
