"""The README's quick start, run as written, and the output it shows, held against what the run prints.

The section "Quick start" of README.md names the command that brings up what
it assumes on this machine (``bash hack/quick-start-bed.sh up``, and ``down``),
shows files to paste into an empty directory (each a YAML block whose first
line is ``# <file name>``) and the commands to run there (each a bash block
holding one ``ansible-playbook`` line); what each command prints is shown in
docs/transcripts/quick-start.md, under the same command. This test runs the
README's bed command as written, writes the files into an empty directory and
runs the commands as they are written, in order, in a shell given the export
lines the bed printed:

- the database: PostgreSQL 18, the real Awa 0.6.9 schema, database ``awa``
  with the roles ``awa_owner``, ``awa_migrator`` and ``awa_runtime``, of which
  the applications' login role is a member;
- the producer hosts ``app1`` and ``app2``: this machine, running the Awa
  applications ``awa-app-1`` and ``awa-app-2`` (worker runtimes that also
  enqueue into ``orders``) under supervisord, and a ``supervisorctl`` first on PATH that talks to it,
  as an installed supervisord's would;
- the collection: this checkout, where the README installs it from Galaxy.

It fails when a command fails, when the change did not happen (the count,
the restarts), or when an output the transcript shows is not what the command
printed, once what differs from run to run is normalised (times and
durations, pids, ids, ports, the readings of the live queue, the progress
lines of the waits). The outputs are shown as a user sees them: stderr
interleaved with stdout, the collection under ~/.ansible/collections and
the directory as ~/awa-quick-start.

After a change to what the role prints, refresh the transcript with
``bash hack/readme.sh`` (this test with AWA_README_REFRESH=1: it writes what
the commands printed into docs/transcripts/quick-start.md instead of comparing).
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from awa_testbed import environment
from awa_testbed.awadb import DEFAULT_AWA_VERSION, AwaDatabase
from awa_testbed.collection import collections_path
from awa_testbed.pgserver import PgServer
from enqueue_shards_support import shard_counts
from rollout_support import program_pids

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TRANSCRIPT = REPO / "docs" / "transcripts" / "quick-start.md"
SECTION = "## Quick start"
BED = "bash hack/quick-start-bed.sh"
REFRESH = os.environ.get("AWA_README_REFRESH") == "1"
# What the README's paths stand for: the directory of the quick start and the collection installed from Galaxy.
SHOWN_DIRECTORY = "~/awa-quick-start"
SHOWN_COLLECTIONS = "~/.ansible/collections/ansible_collections/awa/operations/"
# The variables the README's export line gives libpq, and that the bed's export line gives it instead.
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
    bed: dict[str, str]  # up, down -> the command line
    commands: list[str]  # the ansible-playbook command lines


def section(readme: str) -> tuple[int, int]:
    start = readme.index(SECTION + "\n")
    following = readme.find("\n## ", start + len(SECTION))
    return start, following if following >= 0 else len(readme)


def blocks(text: str, start: int = 0, end: int | None = None) -> list[Block]:
    return [Block(match.group(1), match.group(2), match.start(2), match.end(2))
            for match in FENCE.finditer(text, start, len(text) if end is None else end)]


def command_lines(block: Block) -> list[str]:
    """A bash block's commands: its lines that are not blank or a comment, each without its trailing comment."""
    lines = [line for line in block.text.splitlines() if line.strip() and not line.startswith("#")]
    return [re.sub(r"\s+#.*$", "", line) if line.startswith(BED) else line for line in lines]


def quick_start(readme: str) -> QuickStart:
    """The files, the export lines, the bed's commands and the ansible-playbook commands, in the README's order."""
    files, exports, bed, commands = {}, [], {}, []
    for block in blocks(readme, *section(readme)):
        first_line = block.text.split("\n", 1)[0]
        if block.language == "yaml" and re.fullmatch(r"# [\w./-]+\.ya?ml", first_line):
            files[first_line[2:]] = block.text
        elif block.language == "bash":
            lines = command_lines(block)
            exports += [line for line in lines if line.startswith("export ")]
            bed.update((line.split()[-1], line) for line in lines if line.startswith(BED + " "))
            if len(lines) == 1 and lines[0].startswith("ansible-playbook "):
                commands.append(lines[0])
    return QuickStart(files, exports, bed, commands)


def transcript(text: str) -> dict[str, Block]:
    """command line -> the text block showing what it prints (the block after the command's bash block)."""
    found, shown = blocks(text), {}
    for index, block in enumerate(found):
        if block.language == "bash" and len(command_lines(block)) == 1:
            following = found[index + 1] if index + 1 < len(found) else None
            assert following is not None and following.language == "text", \
                f"{block.text.strip()!r} is not followed by a text block of what it prints"
            shown[command_lines(block)[0]] = following
    return shown


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
    # The run's report is named by the time it was written and a digest of the run (enqueue_shards-20261202T161723Z-
    # 1b3accee.json).
    (re.compile(r"\d{8}T\d{6}Z"), "<time>"),
    (re.compile(r"(enqueue_shards-<time>)-[0-9a-f]{8}\.json"), r"\1-<digest>.json"),
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


# A task's bare result lines, one a host: the two hosts answer in either order.
HOST_RESULTS = re.compile(r"(?:^(?:ok|changed|skipping): \[[^\]\n]+\]\n)+", re.MULTILINE)


def normalised(output: str) -> str:
    for pattern, replacement in NORMALISE:
        output = pattern.sub(replacement, output)
    output = HOST_RESULTS.sub(lambda lines: "".join(sorted(lines.group(0).splitlines(keepends=True))), output)
    return output.rstrip() + "\n"


def test_normalising_keeps_what_the_reader_relies_on():
    printed = ("[localhost]    12s done: orders: 0/2 runtimes on 8 shards\n"
               "orders: enqueue_shards 1 -> 8 on orders - would create 31 lanes and add 64 grants\n"
               "\"delta\": \"0:00:03.844853\", \"end\": \"2026-12-02 13:05:40.851776\", pid 4242, up 3.5s\n"
               "orders | 1 -> 8   | 2 of 2 | 0:13 1:0 | 4    | yes\n"
               "------------------------------------------\n"
               "ok: [app2]\nok: [app1]\n"
               "The window's report: ~/q/enqueue_shards-20261207T071427Z-1b3accee.json.\n")
    assert normalised(printed) == (
        "orders: enqueue_shards 1 -> 8 on orders - would create 31 lanes and add 64 grants\n"
        "\"delta\": \"<duration>\", \"end\": \"<time>\", pid <n>, up <n>s\n"
        "orders | 1 -> 8 | 2 of 2 | 0:<n> 1:<n> | <n> | yes\n"
        "-----\n"
        "ok: [app1]\nok: [app2]\n"
        "The window's report: ~/q/enqueue_shards-<time>-<digest>.json.\n")


def test_the_quick_start_is_found_in_the_readme_and_its_output_in_the_transcript():
    found = quick_start(README.read_text(encoding="utf-8"))
    assert set(found.files) == {"inventory.yml", "change_window.yml"}
    assert found.commands == [
        "ansible-playbook -i inventory.yml change_window.yml --check --diff",
        "ansible-playbook -i inventory.yml change_window.yml"]
    assert found.bed == {"up": f"{BED} up", "down": f"{BED} down"}
    exported = {name for line in found.exports for name in re.findall(r"\b(PG[A-Z]+)=", line)}
    assert exported == set(LIBPQ_VARIABLES), "the bed gives libpq what the README's export line names"
    assert list(transcript(TRANSCRIPT.read_text(encoding="utf-8"))) == found.commands


# ---------------------------------------------------------------------------
# The run


def bed_environment(exports: str) -> dict[str, str]:
    """A user's shell after the bed's export lines: no test settings for Ansible or libpq, this checkout's
    collection, and the Ansible of this test's venv (psycopg included) on PATH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANSIBLE_", "PG"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections_path()),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    shell = subprocess.run(["bash", "-c", exports + "\nenv -0"], env=env, capture_output=True, check=True)
    exported = dict(entry.split("=", 1) for entry in shell.stdout.decode().split("\0") if "=" in entry)
    assert set(LIBPQ_VARIABLES) <= set(exported) and exported["PATH"] != env["PATH"], exports
    return exported


def refreshed(text: str, outputs: list[tuple[Block, str]]) -> str:
    """The transcript with each shown output replaced by what was printed (from the end, so offsets hold)."""
    for block, printed in sorted(outputs, key=lambda pair: pair[0].start, reverse=True):
        text = text[:block.start] + printed.rstrip("\n") + "\n" + text[block.end:]
    return text


@pytest.fixture(scope="module")
def quick_start_bed() -> Iterator[tuple[Path, dict[str, str]]]:
    """What the quick start assumes, brought up by the README's own command; the shell its export lines make."""
    bed = quick_start(README.read_text(encoding="utf-8")).bed
    state_dir = Path(tempfile.mkdtemp(prefix="awa-quick-start-bed-"))
    env = {**os.environ, "AWA_QUICK_START_BED": str(state_dir)}
    try:
        process = subprocess.run(shlex.split(bed["up"]), cwd=REPO, env=env, capture_output=True, text=True,
                                 timeout=600, check=False)
        assert process.returncode == 0, process.stdout + process.stderr
        yield state_dir, bed_environment(process.stdout)
    finally:
        down = subprocess.run(shlex.split(bed["down"]), cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
    assert down.returncode == 0 and not state_dir.exists(), down.stdout + down.stderr


# Three change windows with two rolling restarts each on a test bed of its own: longer than the default 600 s
# when the machine is busy.
@pytest.mark.timeout(1800)
def test_the_quick_start_runs_as_written_and_prints_what_it_shows(quick_start_bed, tmp_path):
    state_dir, env = quick_start_bed
    found = quick_start(README.read_text(encoding="utf-8"))
    text = TRANSCRIPT.read_text(encoding="utf-8")
    shown = transcript(text)
    state = environment.load_state(state_dir)
    db = AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)
    directory = tmp_path / "awa-quick-start"
    directory.mkdir()
    for name, content in found.files.items():
        (directory / name).write_text(content, encoding="utf-8")
    pids_before = program_pids(state_dir)

    outputs, differences = [], []
    for command in found.commands:
        process = subprocess.run(shlex.split(command), cwd=directory, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
        printed = as_shown(process.stdout, directory)
        assert process.returncode == 0, f"$ {command}\n{printed}"
        outputs.append((shown[command], printed))
        if normalised(printed) != normalised(shown[command].text):
            differences += [f"$ {command}", *difflib.unified_diff(
                normalised(shown[command].text).splitlines(), normalised(printed).splitlines(),
                "docs/transcripts/quick-start.md", "printed", lineterm="")]

    # What the README says the change did, and that a second run changes and restarts nothing.
    assert shard_counts(db)["orders"] == 8
    pids_after = program_pids(state_dir)
    assert all(pids_after[name] not in (None, pids_before[name]) for name in pids_after), (pids_before, pids_after)
    again = subprocess.run(shlex.split(found.commands[-1]), cwd=directory, env=env, capture_output=True, text=True,
                           timeout=900, check=False)
    assert again.returncode == 0 and all(re.search(rf"{host} +: ok=\d+ +changed=0 ", again.stdout)
                                         for host in ("app1", "app2")), again.stdout
    assert program_pids(state_dir) == pids_after

    if REFRESH:
        TRANSCRIPT.write_text(refreshed(text, outputs), encoding="utf-8")
    else:
        assert not differences, ("The quick start's transcript shows other output than its commands print; if the "
                                 "new output is right, refresh it with: bash hack/readme.sh\n" + "\n".join(differences))


def test_a_service_supervisord_does_not_have_is_refused_at_the_reach_by_the_readmes_status_command(quick_start_bed,
                                                                                                   tmp_path):
    """The README's status command passes supervisorctl status's exit on: 4 for a program supervisord does not
    have, which the reach refuses before anything is changed, in check mode and for real."""
    state_dir, env = quick_start_bed
    found = quick_start(README.read_text(encoding="utf-8"))
    state = environment.load_state(state_dir)
    db = AwaDatabase(PgServer.from_description(state["server"]), state["database"], DEFAULT_AWA_VERSION)
    for name, content in found.files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    counts, pids = shard_counts(db), program_pids(state_dir)
    typo = '{"enqueue_shards_services": ["awa-app-1", "awa-app-3"]}'

    for command in found.commands:
        process = subprocess.run([*shlex.split(command), "-e", typo], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=900, check=False)

        assert process.returncode != 0, process.stdout
        failed = process.stdout[process.stdout.rfind("TASK ["):]
        assert "Reach | stop unless" in failed and "app1/awa-app-3: the status command sh -c " in failed, failed
        assert ("awa-app-3 says there is no such service (exit status 4: awa-app-3: ERROR (no such process)); correct "
                "enqueue_shards_services for this host, or set the service up there") in failed, failed
        assert (shard_counts(db), program_pids(state_dir)) == (counts, pids), "nothing was changed or restarted"
