"""What molecule's verify steps read from the test bed's state folder ($AWA_TESTBED_STATE).

``state.json`` is written by ``python -m awa_testbed up``; ``molecule-pass.json``
by the scenario's playbooks, naming the pass that just ran and what it expects.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path


def state_dir() -> Path:
    return Path(os.environ["AWA_TESTBED_STATE"])


def read_json(name: str):
    return json.loads((state_dir() / name).read_text(encoding="utf-8"))


@cache
def bed_state() -> dict:
    return read_json("state.json")


@cache
def molecule_pass() -> dict:
    return read_json("molecule-pass.json")
