# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""shard_advice: an ansible-rulebook event source of Awa shard-count advice.

Every ``interval`` seconds it watches the load on Awa queues for ``window``
seconds and advises a shard count per queue, with exactly the rule of
``awa.operations.awa_enqueue_shards_info`` (``advise: true``, documented in
docs/enqueue_shards_info.md). Advice becomes an event only when it is
actionable (raise or lower), held for ``stable`` windows in a row, one step
at a time (a raise at most doubles the count, a lower at most halves it), and
not within ``cooldown`` seconds of the queue's last change (its last event, or
the last change the change ledger recorded, by hand too; twice that for the
opposite direction). docs/event_driven.md has the whole contract.

Events:
  awa_shard_advice: queue, verdict (raise or lower; with every_window also
    keep and will_not_help, marked actionable false), shards (the count now),
    to (one step toward the advice), advised_to (the rule's own target),
    actionable, windows, limit, message, ordering, findings, evidence.
  awa_shard_advice_error: message, retry_in_seconds - a window that could not
    be read (the source goes on and tries again after interval).

Arguments:
  connection: the modules' connection options by name and with their
    defaults (login_host, login_port, login_user, login_password, login_db,
    login_unix_socket, ssl_mode, ca_cert, ssl_cert, ssl_key, connect_params,
    session_role), as the role's enqueue_shards_connection. The role needs
    the grants docs/enqueue_shards_info.md lists for advice (pg_monitor).
  queues: the logical queues to watch (default: every queue).
  window: seconds of each watch, 1-600 (default 10).
  interval: seconds from the start of one window to the next, at least
    window (default 300).
  stable: windows in a row an actionable verdict must hold (default 3).
  cooldown: seconds after a change of a queue's count (its event, or a change
    recorded in the change ledger) before its next event (default 3600).
  gains: a gains table as benchmarks/shard_gains.py prints it (default: the
    one shipped, measured on this project's machine).
  lock_timeout: seconds each read waits for a lock, 0 for no limit (default 5).
  every_window: also emit every window's advice that is not admitted, with
    actionable false (default false).

Example:
  - name: Advise shard counts
    hosts: localhost
    sources:
      - awa.operations.shard_advice:
          connection:
            login_host: db.example.com
            login_user: awa_monitor
            login_password: "{{ awa_monitor_password }}"
            login_db: app
          queues: [orders, emails]
    rules:
      - name: Show actionable advice
        condition: event.awa_shard_advice.actionable == true
        action:
          debug:
            msg: "{{ event.awa_shard_advice.message }}"
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

# ansible-rulebook runs this file by path (runpy.run_path) where `ansible-galaxy collection list` found it, and
# makes no collection importable. The rest of the collection is imported as Ansible imports an installed collection:
# through ansible-core's collection loader, over the collections paths Ansible is configured with (the ones
# ansible-galaxy listed). The loader's path hook is taken out again right after: left in, it would claim the next
# file ansible-rulebook runs by path (its own event filters, whose folder name starts with "ansible"), and that run
# would fail.
_LOADER_OURS = AnsibleCollectionConfig.collection_finder is None
if _LOADER_OURS:
    init_plugin_loader()
try:
    from ansible_collections.awa.operations.plugins.module_utils.db.connection import open_connection
    from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError
    from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info
    from ansible_collections.awa.operations.plugins.module_utils.info_run import advise_queues
    from ansible_collections.awa.operations.plugins.module_utils.advice.result import Advice
    from ansible_collections.awa.operations.plugins.module_utils.info.result import ShardsRead
    from ansible_collections.awa.operations.plugins.plugin_utils import advice_events
finally:
    if _LOADER_OURS and AnsibleCollectionConfig.collection_finder is not None:
        # The loader's own teardown (the modules imported stay imported).
        type(AnsibleCollectionConfig.collection_finder)._remove()  # pylint: disable=protected-access


def advise_once(options: advice_events.SourceOptions) -> tuple[ShardsRead, dict[str, Advice]]:
    """One window: read the queues (with their last recorded change), watch their load, and advise (blocking;
    run in a thread). The read and the advice."""
    with open_connection(options.connection) as conn:
        info = read_shards_info(conn, queues=options.queues, lock_timeout=options.lock_timeout)
        return info, advise_queues(conn, info, options.window, options.lock_timeout, options.gains)


async def main(queue: asyncio.Queue[dict[str, Any]], args: dict[str, Any]) -> None:
    """Advise window after window and put what the gate admits on ``queue``; bad arguments raise at once."""
    options = advice_events.source_options(args)
    gate = advice_events.AdviceGate(stable=options.stable, cooldown=options.cooldown)
    while True:
        started = time.monotonic()
        try:
            info, advised = await asyncio.to_thread(advise_once, options)
        except AwaOperationsError as exc:
            await queue.put(advice_events.error_event(exc.message, options.interval))
        else:
            for event in advice_events.events_for_window(gate, info, advised, options.every_window):
                await queue.put(event)
        await asyncio.sleep(max(0.0, options.interval - (time.monotonic() - started)))


if __name__ == "__main__":
    # python shard_advice.py '{"connection": {"login_host": "..."}, "queues": ["orders"], "stable": 1}': print events.
    import json
    import sys

    class PrintQueue:
        async def put(self, event: dict[str, Any]) -> None:
            print(json.dumps(event, default=str), flush=True)

    asyncio.run(main(PrintQueue(), json.loads(sys.argv[1])))  # type: ignore[arg-type]  # a queue by its put alone
