# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The diff of an environment file: every variable added, removed or changed is named, no secret value is shown."""

from __future__ import annotations

import pytest

from ansible_collections.awa.operations.plugins.module_utils.producer.environment_diff import environment_diff

PASSWORD = "pw-Zq7-never-shown"
TOKEN = "tok-9Xc-never-shown"
URL = f"AWA_DATABASE_URL=postgres://app:{PASSWORD}@db/awa"
BEFORE = f"{URL}\nAWA_API_TOKEN=old-{TOKEN}\nAWA_OVERRIDE_REFRESH_MS=1000\n"
REFRESH = ("AWA_OVERRIDE_REFRESH_MS",)


def lines(before: str | None, after: str, shown: tuple[str, ...] = REFRESH) -> list[str]:
    text = environment_diff(before, after, shown)
    assert PASSWORD not in text and TOKEN not in text, text
    return text.splitlines()


def test_the_unchanged_url_next_to_a_changed_line_is_named_never_shown():
    # The reported leak: a unified diff printed the URL line as context of the changed line below it.
    assert lines(BEFORE, BEFORE.replace("=1000", "=500")) == [
        "~AWA_OVERRIDE_REFRESH_MS=500 (changed from 1000)",
        " unchanged: AWA_API_TOKEN, AWA_DATABASE_URL"]


def test_a_secret_added_removed_or_changed_is_named_and_masked():
    rotated = PASSWORD[::-1]
    after = f"{URL.replace(PASSWORD, rotated)}\nAWA_RESULTS_TOKEN={TOKEN}\nAWA_OVERRIDE_REFRESH_MS=1000\n"
    assert lines(BEFORE, after) == [
        "-AWA_API_TOKEN=******** (removed)",
        "~AWA_DATABASE_URL=******** (changed)",
        "+AWA_RESULTS_TOKEN=******** (added)",
        " unchanged: AWA_OVERRIDE_REFRESH_MS"]
    assert rotated not in environment_diff(BEFORE, after, REFRESH), "the new password is masked too"


def test_a_new_file_names_every_variable_and_shows_only_the_safe_values():
    assert lines(None, BEFORE) == [
        "+AWA_API_TOKEN=******** (added)",
        "+AWA_DATABASE_URL=******** (added)",
        "+AWA_OVERRIDE_REFRESH_MS=1000 (added)"]


def test_a_variable_listed_as_safe_shows_its_value_added_removed_or_changed():
    before = "AWA_REGION=eu-1\nAWA_ZONE=a\n"
    assert environment_diff(before, "AWA_REGION=eu-2\nAWA_CELL=c7\n", ("AWA_REGION", "AWA_ZONE", "AWA_CELL")) == (
        "+AWA_CELL=c7 (added)\n"
        "~AWA_REGION=eu-2 (changed from eu-1)\n"
        "-AWA_ZONE=a (removed)\n")
    # Names are matched exactly: a listed name shows nothing of another.
    assert environment_diff(before, "AWA_REGION=eu-2\n", ("AWA_REGIO", "awa_region")) == (
        "~AWA_REGION=******** (changed)\n-AWA_ZONE=******** (removed)\n")


@pytest.mark.parametrize("line, counted", [
    (f"# AWA_DATABASE_URL=postgres://app:{PASSWORD}@old-db/awa", "1 comment line (not shown: a comment may hold a "
                                                                 "secret)"),
    (f"; legacy token {TOKEN}", "1 comment line (not shown: a comment may hold a secret)"),
    (f"export AWA_API_TOKEN={TOKEN}", "1 other line (not NAME=value, not shown)"),
    (f"{TOKEN}", "1 other line (not NAME=value, not shown)"),
    ("   ", "1 blank line"),
])
def test_a_line_that_is_not_name_value_is_counted_never_shown(line, counted):
    assert lines(BEFORE, BEFORE + line + "\n") == [f"+{counted}", " unchanged: AWA_API_TOKEN, AWA_DATABASE_URL, "
                                                                  "AWA_OVERRIDE_REFRESH_MS"]
    assert lines(BEFORE + line + "\n", BEFORE)[0] == f"-{counted}"


def test_comments_added_and_removed_are_counted_on_one_line():
    before = f"# old note {TOKEN}\n# header\nA=1\n"
    after = f"# new note {PASSWORD}\n# header\n# another\nA=1\n"
    assert lines(before, after, ()) == [
        "~2 comment lines added, 1 removed (not shown: a comment may hold a secret)", " unchanged: A"]


def test_a_change_of_layout_alone_is_said_as_such():
    assert lines(BEFORE, "\n".join(reversed(BEFORE.splitlines())) + "\n") == [
        " only the layout changed (the order of lines, spaces, line endings or a variable assigned twice): every "
        "variable keeps the value a service reads",
        " unchanged: AWA_API_TOKEN, AWA_DATABASE_URL, AWA_OVERRIDE_REFRESH_MS"]
    # The value a service reads is the last one assigned: dropping the first of two assignments changes none.
    assert lines(f"A={TOKEN}\nA=2\n", "A=2", ())[0].startswith(" only the layout changed")


def test_the_last_assignment_is_the_value_compared_and_masked():
    assert lines(f"A={TOKEN}\n", f"A={TOKEN}\nA={PASSWORD}\n", ()) == ["~A=******** (changed)"]
    assert lines("A=1\nA=2\n", "A=2\nA=1\n", ("A",)) == ["~A=1 (changed from 2)"]


def test_names_and_spaces_are_read_as_systemd_reads_them():
    # Spaces around the name are not part of it; a value keeps its own (and its quotes).
    assert lines(" A = 1\n", "A= 1\n", ("A",)) == [" only the layout changed (the order of lines, spaces, line endings "
                                                   "or a variable assigned twice): every variable keeps the value a "
                                                   "service reads", " unchanged: A"]
    assert lines('A="x y"\n', "A=x y\n", ("A",)) == ['~A=x y (changed from "x y")']


def test_many_unchanged_variables_are_named_briefly():
    before = "".join(f"V{index:02}=secret-{index}\n" for index in range(30))
    text = environment_diff(before, before + "NEW=1\n", ())
    assert text == "+NEW=******** (added)\n unchanged: V00..V29\n"
    assert "secret-" not in text
