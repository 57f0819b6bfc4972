"""Making sure nothing the test bed starts outlives it.

Two mechanisms:

* Children started *attached* ask the kernel to signal them when their parent
  dies (``PR_SET_PDEATHSIG``), so a test run that is killed outright still
  takes its servers and runtimes with it.
* Things started *detached* (servers and supervisord for molecule and the
  demo, which outlive the command that started them) are written to a
  registry with the run id; ``python -m awa_testbed reap`` stops them.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .binaries import CACHE_ROOT
from .waiting import poll

_PR_SET_PDEATHSIG = 1
REGISTRY = CACHE_ROOT / "registry"
RUN_ID_ENV = "AWA_TESTBED_RUN_ID"


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``sig`` when its parent dies.

    Only from the main thread: the kernel sends the signal when the *thread*
    that forked the child ends, so a child started from a short-lived thread
    would be stopped the moment that thread returns.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(f"start test bed processes from the main thread, not {threading.current_thread().name}: "
                           "PR_SET_PDEATHSIG stops the child as soon as the thread that started it ends")
    libc = ctypes.CDLL(None, use_errno=True)

    def _preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, sig)

    return _preexec


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_pid_gone(pid: int, timeout: float) -> bool:
    def gone() -> bool:
        if not pid_alive(pid):
            return True
        try:
            # Reap it if it is our child; ignore when it is not.
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return not pid_alive(pid)

    return poll(gone, bool, timeout, interval=0.05)[0]


def terminate_pid(pid: int, first: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Send ``first``, then SIGKILL if the process is still there after ``timeout``."""
    for sig, wait in ((first, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_pid_gone(pid, wait):
            return


def register(kind: str, key: str, record: dict) -> Path:
    """Remember a detached process so ``reap`` can stop it later."""
    REGISTRY.mkdir(parents=True, exist_ok=True)
    path = REGISTRY / f"{kind}-{key}.json"
    record = {**record, "kind": kind, "run_id": os.environ.get(RUN_ID_ENV)}
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def unregister(kind: str, key: str) -> None:
    (REGISTRY / f"{kind}-{key}.json").unlink(missing_ok=True)


def registered(run_id: str | None = None) -> Iterator[tuple[Path, dict]]:
    if not REGISTRY.is_dir():
        return
    for path in sorted(REGISTRY.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if run_id is None or record.get("run_id") == run_id:
            yield path, record


@contextlib.contextmanager
def machine_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the block: one holder at a time on this machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
