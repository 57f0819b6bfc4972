"""3. Many queues: changing 100 of them, planning them, reading them all.

* Python API: N queues, S 1 -> 8, with ``change_queues`` (what the
  module's ``queues`` option runs: one connection, a transaction per queue),
  check mode first, then for real, then 8 -> 64 so the database holds N
  queues x 64 shards;
* the info read of every queue (``read_shards_info``) on that database;
* Ansible: ``ansible-playbook`` on localhost, on N new queues each: one module
  run per queue in a loop (playbooks/change_each_queue.yml), one module run
  with the ``queues`` list (playbooks/change_queue_list.yml), and the role
  awa.operations.enqueue_shards when it is there (playbooks/change_through_role.yml);
  and the info module once over the N x 64 database. The loop playbook with an
  empty list gives ansible-playbook's own start-up cost, reported apart.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from pathlib import Path

from ansible_collections.awa.operations.plugins.module_utils.change.operation import change_queues
from ansible_collections.awa.operations.plugins.module_utils.change.result import ChangesRun
from ansible_collections.awa.operations.plugins.module_utils.errors import AwaOperationsError
from ansible_collections.awa.operations.plugins.module_utils.change.request import validate_request
from ansible_collections.awa.operations.plugins.module_utils.info.read import read_shards_info

from . import environment, stats, tables
from .environment import BenchServer

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
ROLE = Path(__file__).resolve().parents[1] / "roles" / "enqueue_shards"
FIRST_SHARDS = 8
INFO_SHARDS = 64
INFO_READS = 3
RAISED_LOCKS_PER_TRANSACTION = 256


Result = TypeVar("Result")


def timed(action: Callable[[], Result]) -> tuple[Result, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def change_all(conn, queues: list[str], shards: int, *, check_mode: bool = False) -> dict:
    """``change_queues`` (the module's queues option): one connection, a transaction per queue."""
    requests = [validate_request(queue, shards, new_queue=True) for queue in queues]
    result: ChangesRun  # read by key below, as change/result.py declares it
    result, seconds = timed(lambda: change_queues(conn, requests, check_mode=check_mode))
    per_queue = [round(view["duration"] * 1000, 2) for view in result["queues"].values()]
    return {"queues": len(queues), "shards": shards, "check_mode": check_mode, "changed": result["changed"],
            "total_s": round(seconds, 3), "per_queue_ms": stats.summary(per_queue)}


def read_all(db) -> dict:
    """The info read of every queue (read_shards_info), ``INFO_READS`` times; or the error it fails with."""
    with environment.connect(db) as conn:
        try:
            runs = [timed(lambda: read_shards_info(conn)) for dummy in range(INFO_READS)]
        except AwaOperationsError as exc:
            return {"error": exc.message}
    info = runs[-1][0]
    lanes = sum(len(view.get("lanes", [])) for view in info["queues"].values())
    return {"queues": len(info["queues"]), "lanes": lanes,
            "seconds": stats.summary([round(seconds, 3) for dummy, seconds in runs])}


def info_module(db, work_dir: Path) -> dict:
    """The info module once over every queue, through ansible-playbook; or how it failed."""
    try:
        return {"total_s": run_playbook("read_every_queue.yml", {"bench_login": db.login_args()}, work_dir)}
    except RuntimeError as exc:
        return {"error": next((line.strip() for line in str(exc).splitlines() if '"msg"' in line), str(exc)[:300])}


def read_every_queue(db, work_dir: Path) -> dict:
    return {"python": read_all(db), "module": info_module(db, work_dir)}


def run_playbook(name: str, variables: dict, work_dir: Path) -> float:
    """Wall seconds of ``ansible-playbook`` on localhost (local connection)."""
    extra = work_dir / f"{name}-vars.json"
    extra.write_text(json.dumps(variables), encoding="utf-8")
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{extra}", str(PLAYBOOKS / name)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=work_dir)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}")
    return round(seconds, 3)


@dataclass(frozen=True)
class Play:
    """One way to change many queues in one ansible-playbook run."""

    playbook: str
    queue_prefix: str
    variables: Callable[[dict, list[str]], dict]  # (login options, queue names) -> extra variables


PLAYS = {
    "module loop": Play("change_each_queue.yml", "loop_", lambda login, queues: {
        "bench_login": login, "bench_shards": FIRST_SHARDS, "bench_queues": queues}),
    "module, queues list": Play("change_queue_list.yml", "list_", lambda login, queues: {
        "bench_login": login,
        "bench_changes": [{"queue": queue, "shards": FIRST_SHARDS, "new_queue": True} for queue in queues]}),
    "role": Play("change_through_role.yml", "role_", lambda login, queues: {
        "enqueue_shards_connection": login, "enqueue_shards_pickup": "refresh",
        "enqueue_shards_queues": [{"queue": queue, "shards": FIRST_SHARDS, "new_queue": True} for queue in queues]}),
}


def available_plays() -> dict[str, Play]:
    return {name: play for name, play in PLAYS.items() if name != "role" or ROLE.is_dir()}


def ansible_plays(bench: BenchServer, queue_count: int, work_dir: Path) -> dict:
    """Each play on N new queues of one fresh database, after the start-up cost of an empty play."""
    db = bench.fresh_database()
    try:
        login = db.login_args()
        startup = run_playbook(PLAYS["module loop"].playbook, PLAYS["module loop"].variables(login, []), work_dir)
        plays: dict = {"startup_s": startup}
        for name, play in available_plays().items():
            queues = [f"{play.queue_prefix}{index:03d}" for index in range(queue_count)]
            total = run_playbook(play.playbook, play.variables(login, queues), work_dir)
            changed = db.scalar("SELECT count(*) FROM awa.queue_meta WHERE starts_with(queue, %s) "
                                "AND enqueue_shards = %s", (play.queue_prefix, FIRST_SHARDS))
            plays[name] = {"queues": queue_count, "changed": changed, "total_s": total,
                           "per_queue_ms": round((total - startup) * 1000 / queue_count, 1)}
    finally:
        db.drop()
    return plays


def run(bench: BenchServer, queue_count: int, work_dir: Path) -> dict:
    db = bench.fresh_database()
    try:
        queues = [f"scale_{index:03d}" for index in range(queue_count)]
        result = {}
        with environment.connect(db) as conn:
            result["check_mode"] = change_all(conn, queues, FIRST_SHARDS, check_mode=True)
            result["python_api"] = change_all(conn, queues, FIRST_SHARDS)
        result["info_first"] = read_every_queue(db, work_dir)
        with environment.connect(db) as conn:
            result["python_api_raise"] = change_all(conn, queues, INFO_SHARDS)
        result["info"] = read_every_queue(db, work_dir)
        if any("error" in read for read in result["info"].values()):
            # Every lane sequence read takes a relation lock until the read's transaction ends.
            with environment.restarted_with(bench, {"max_locks_per_transaction": RAISED_LOCKS_PER_TRANSACTION}):
                result["info_raised_locks"] = read_every_queue(db, work_dir)
    finally:
        db.drop()
    result["ansible"] = ansible_plays(bench, queue_count, work_dir)
    return result


def failure(measured: dict) -> str:
    """'' when it worked, else ': FAILED (<the reason in the error's parentheses>)'."""
    if "error" not in measured:
        return ""
    reason = re.search(r"\(([^()]+)\)", measured["error"])
    return f": FAILED ({reason.group(1) if reason else measured['error'][:80]})"


def _info_rows(label: str, read: dict) -> list[list]:
    python, module = read["python"], read["module"]
    size = f"{python['queues']} queues, {python['lanes']} lanes" if "error" not in python else "every queue"
    return [[f"info read ({label}; {size}), read_shards_info{failure(python)}",
             python["seconds"]["median"] if "seconds" in python else None, None],
            [f"info module once over the same (ansible-playbook, start-up incl.){failure(module)}",
             module.get("total_s"), None]]


def table(major: int, result: dict) -> str:
    plays = result["ansible"]
    count = result["python_api"]["queues"]
    rows = [
        [f"check mode, {count} queues S 1 -> {FIRST_SHARDS} (Python API, queues list)",
         result["check_mode"]["total_s"], result["check_mode"]["per_queue_ms"]["median"]],
        [f"change {count} queues S 1 -> {FIRST_SHARDS} (Python API, queues list)",
         result["python_api"]["total_s"], result["python_api"]["per_queue_ms"]["median"]],
        [f"change {count} queues S {FIRST_SHARDS} -> {INFO_SHARDS} (Python API, queues list)",
         result["python_api_raise"]["total_s"], result["python_api_raise"]["per_queue_ms"]["median"]],
        *[[f"ansible-playbook, {name}, {count} queues S 1 -> {FIRST_SHARDS} (start-up {plays['startup_s']:.1f} s incl.)",
           play["total_s"], play["per_queue_ms"]] for name, play in plays.items() if name != "startup_s"],
        *_info_rows(f"{count} x {FIRST_SHARDS} shards", result["info_first"]),
        *_info_rows(f"{count} x {INFO_SHARDS} shards", result["info"]),
        *(_info_rows(f"{count} x {INFO_SHARDS} shards, max_locks_per_transaction={RAISED_LOCKS_PER_TRANSACTION}",
                     result["info_raised_locks"]) if "info_raised_locks" in result else []),
    ]
    return tables.render(f"Scale, PostgreSQL {major}", ["what", "total s", "per queue ms (median)"], rows,
                         "Per queue for the playbook = (total - start-up of the same play with no queues) / queues.")
