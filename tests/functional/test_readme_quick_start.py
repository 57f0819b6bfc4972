"""The README's quick start, run as written, and the output it shows, held against what the run prints.

The section "Quick start" of README.md shows files to paste into an empty
directory (each a YAML block whose first line is ``# <file name>``), the
commands to run there (each a bash block holding one ``ansible-playbook``
line) and, after each command, what it prints (the next ``text`` block).
This test writes the files into an empty directory and runs the commands as
they are written, in order, on what the quick start describes:

- the database, given to libpq by the section's ``export`` line: the test
  bed's (PostgreSQL 18, the real Awa 0.6.9 schema, database ``awa`` with the
  roles ``awa_owner`` and ``awa_migrator``), with the role ``awa_runtime``
  the README names, of which the applications' login role is a member;
- the producer host: this machine, running the Awa applications ``awa-app-1``
  and ``awa-app-2`` (worker runtimes that also enqueue into ``orders``)
  under the test bed's supervisord, and a ``supervisorctl`` first on PATH
  that talks to it, as an installed supervisord's would;
- the collection: this checkout, where the README installs it from Galaxy.

It fails when a command fails, when the change did not happen (the count,
the restarts), or when an output the README shows is not what the command
printed, once what differs from run to run is normalised (times and
durations, pids, ids, ports, the readings of the live queue, the progress
lines of the waits). The outputs are shown as a user sees them: stderr
interleaved with stdout, the collection under ~/.ansible/collections and
the directory as ~/awa-quick-start.

After a change to what the role prints, refresh the README's outputs with
``bash hack/readme.sh`` (this test with AWA_README_REFRESH=1: it writes what
the commands printed into README.md instead of comparing).
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg import sql

from awa_testbed import environment
from awa_testbed.awadb import DEFAULT_AWA_VERSION, AwaDatabase
from awa_testbed.collection import collections_path
from awa_testbed.pgserver import PgServer
from enqueue_shards_support import shard_counts
from rollout_support import program_pids

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SECTION = "## Quick start"
REFRESH = os.environ.get("AWA_README_REFRESH") == "1"
# What the README's paths stand for: the directory of the quick start and the collection installed from Galaxy.
SHOWN_DIRECTORY = "~/awa-quick-start"
SHOWN_COLLECTIONS = "~/.ansible/collections/ansible_collections/awa/operations/"
# The variables the README's export line gives libpq, and that this test gives it instead.
LIBPQ_VARIABLES = ("PGHOST", "PGPORT", "PGPASSWORD")

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.DOTALL | re.MULTILINE)


@dataclass
class Block:
    language: str
    text: str
    start: int  # offset of the block's text in the README
    end: int


@dataclass
class QuickStart:
    files: dict[str, str]  # name -> content
    exports: list[str]  # the export lines
    runs: list[tuple[str, Block]]  # command line -> the block showing its output


def section(readme: str) -> tuple[int, int]:
    start = readme.index(SECTION + "\n")
    following = readme.find("\n## ", start + len(SECTION))
    return start, following if following >= 0 else len(readme)


def blocks(readme: str) -> list[Block]:
    start, end = section(readme)
    return [Block(match.group(1), match.group(2), match.start(2), match.end(2))
            for match in FENCE.finditer(readme, start, end)]


def quick_start(readme: str) -> QuickStart:
    """The files, the export lines and the commands with their shown outputs, in the README's order."""
    found = blocks(readme)
    files, exports, runs = {}, [], []
    for index, block in enumerate(found):
        first_line = block.text.split("\n", 1)[0]
        if block.language == "yaml" and re.fullmatch(r"# [\w./-]+\.ya?ml", first_line):
            files[first_line[2:]] = block.text
        elif block.language == "bash":
            commands = [line for line in block.text.splitlines() if line.strip() and not line.startswith("#")]
            exports += [line for line in commands if line.startswith("export ")]
            if len(commands) == 1 and commands[0].startswith("ansible-playbook "):
                shown = found[index + 1] if index + 1 < len(found) else None
                assert shown is not None and shown.language == "text", \
                    f"{commands[0]!r} is not followed by a text block of what it prints"
                runs.append((commands[0], shown))
    return QuickStart(files, exports, runs)


# ---------------------------------------------------------------------------
# What a run prints, as the README shows it, and as it is compared


def as_shown(output: str, directory: Path) -> str:
    """The output with the paths a user would see: the collection from Galaxy, the quick start's directory."""
    output = re.sub(r"/\S*?/ansible_collections/awa/operations/", SHOWN_COLLECTIONS, output)
    return output.replace(str(directory), SHOWN_DIRECTORY)


NORMALISE = (
    # A wait's progress lines: one per poll, so their number depends on timing.
    (re.compile(r"^\[[^\]\n]+\] +\d+s .*\n", re.MULTILINE), ""),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:?\d\d|Z)?"), "<time>"),
    # The run's report is named by the time it was written (enqueue_shards-20261202T161723Z.json).
    (re.compile(r"\d{8}T\d{6}Z"), "<time>"),
    (re.compile(r"\b\d+:\d\d:\d\d(\.\d+)?\b"), "<duration>"),
    (re.compile(r"\b\d+(\.\d+)?( ?(s|ms|seconds?))\b"), r"<n>\2"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\b(pids?|instance|instance_id|port)([\"':= ]+)\d+"), r"\1\2<n>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost|::1):\d+"), r"\1:<port>"),
    # The live queue's readings: ready jobs per shard ("0:3 1:0") and beyond the count.
    (re.compile(r"\b(\d+):\d+\b"), r"\1:<n>"),
    (re.compile(r"(\| +)\d+( +\| (not yet|yes|no|converged))"), r"\1<n>\2"),
    (re.compile(r"\b\d+ ready\b"), "<n> ready"),
    # Table columns are as wide as the readings in them.
    (re.compile(r" {2,}"), " "),
    (re.compile(r"-{5,}"), "-----"),
)


def normalised(output: str) -> str:
    for pattern, replacement in NORMALISE:
        output = pattern.sub(replacement, output)
    return output.rstrip() + "\n"


def test_normalising_keeps_what_the_reader_relies_on():
    printed = ("[localhost]    12s done: orders: 0/2 runtimes on 8 shards\n"
               "orders: enqueue_shards 1 -> 8 on orders - would create 31 lanes and add 64 grants\n"
               "\"delta\": \"0:00:03.844853\", \"end\": \"2026-12-02 13:05:40.851776\", pid 4242, up 3.5s\n"
               "orders | 1 -> 8   | 2 of 2 | 0:13 1:0 | 4    | yes\n"
               "------------------------------------------\n")
    assert normalised(printed) == (
        "orders: enqueue_shards 1 -> 8 on orders - would create 31 lanes and add 64 grants\n"
        "\"delta\": \"<duration>\", \"end\": \"<time>\", pid <n>, up <n>s\n"
        "orders | 1 -> 8 | 2 of 2 | 0:<n> 1:<n> | <n> | yes\n"
        "-----\n")


def test_the_quick_start_is_found_in_the_readme():
    found = quick_start(README.read_text(encoding="utf-8"))
    assert set(found.files) == {"inventory.yml", "change_window.yml"}
    assert [command for command, dummy in found.runs] == [
        "ansible-playbook -i inventory.yml change_window.yml --check --diff",
        "ansible-playbook -i inventory.yml change_window.yml"]
    exported = {name for line in found.exports for name in re.findall(r"\b(PG[A-Z]+)=", line)}
    assert exported == set(LIBPQ_VARIABLES), "the test gives libpq what the README's export line names"


# ---------------------------------------------------------------------------
# The run


def supervisorctl_on_path(folder: Path, state: dict) -> Path:
    """A folder holding ``supervisorctl`` for the test bed's supervisord (as /etc/supervisor's config would)."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "supervisorctl"
    program.write_text("#!/bin/sh\nexec " + shlex.join(state["supervisorctl"]) + ' "$@"\n', encoding="utf-8")
    program.chmod(0o755)
    return folder


def awa_runtime_role(db: AwaDatabase, state: dict) -> None:
    """The README's runtime role awa_runtime, of which the applications' login role is a member."""
    with db.connect() as conn:
        conn.execute("CREATE ROLE awa_runtime NOLOGIN")
        for member in (*state["runtime_roles"], state["migrator"]):
            conn.execute(sql.SQL("GRANT awa_runtime TO {}").format(sql.Identifier(member)))


def user_environment(state: dict, bin_dir: Path) -> dict[str, str]:
    """A user's shell: no test settings for Ansible, the exported libpq variables, this checkout's collection."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANSIBLE_", "PG"))}
    login = state["login"]
    env.update(PGHOST=login["login_host"], PGPORT=str(login["login_port"]), PGPASSWORD=login["login_password"],
               ANSIBLE_COLLECTIONS_PATH=str(collections_path()),
               PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]))
    return env


def refreshed(readme: str, outputs: list[tuple[Block, str]]) -> str:
    """The README with each shown output replaced by what was printed (from the end, so offsets hold)."""
    for block, printed in sorted(outputs, key=lambda pair: pair[0].start, reverse=True):
        readme = readme[:block.start] + printed.rstrip("\n") + "\n" + readme[block.end:]
    return readme


@pytest.fixture(scope="module")
def quick_start_bed():
    """The test bed as the quick start describes it: database awa, queue orders, awa-app-1 and awa-app-2."""
    with environment.temporary(major=18, apps=2, queue="orders", database="awa") as state_dir:
        state = environment.load_state(state_dir)
        db = AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)
        awa_runtime_role(db, state)
        yield state_dir, state, db


# Three change windows with two rolling restarts each on a test bed of its own: longer than the default 600 s
# when the machine is busy.
@pytest.mark.timeout(1800)
def test_the_quick_start_runs_as_written_and_prints_what_it_shows(quick_start_bed, tmp_path):
    state_dir, state, db = quick_start_bed
    readme = README.read_text(encoding="utf-8")
    found = quick_start(readme)
    directory = tmp_path / "awa-quick-start"
    directory.mkdir()
    for name, content in found.files.items():
        (directory / name).write_text(content, encoding="utf-8")
    env = user_environment(state, supervisorctl_on_path(tmp_path / "bin", state))
    pids_before = program_pids(state_dir)

    outputs, differences = [], []
    for command, shown in found.runs:
        process = subprocess.run(shlex.split(command), cwd=directory, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
        printed = as_shown(process.stdout, directory)
        assert process.returncode == 0, f"$ {command}\n{printed}"
        outputs.append((shown, printed))
        if normalised(printed) != normalised(shown.text):
            differences += [f"$ {command}", *difflib.unified_diff(
                normalised(shown.text).splitlines(), normalised(printed).splitlines(), "README.md", "printed",
                lineterm="")]

    # What the README says the change did, and that a second run changes and restarts nothing.
    assert shard_counts(db)["orders"] == 8
    pids_after = program_pids(state_dir)
    assert all(pids_after[name] not in (None, pids_before[name]) for name in pids_after), (pids_before, pids_after)
    again = subprocess.run(shlex.split(found.runs[-1][0]), cwd=directory, env=env, capture_output=True, text=True,
                           timeout=900, check=False)
    assert again.returncode == 0 and re.search(r"localhost +: ok=\d+ +changed=0 ", again.stdout), again.stdout
    assert program_pids(state_dir) == pids_after

    if REFRESH:
        README.write_text(refreshed(readme, outputs), encoding="utf-8")
    else:
        assert not differences, ("The README's quick start shows other output than its commands print; if the new "
                                 "output is right, refresh it with: bash hack/readme.sh\n" + "\n".join(differences))
