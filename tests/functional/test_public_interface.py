"""What ansible-doc publishes is docs/public_interface.yml, no more and no less.

A name ansible-doc shows is a promise to users (issue 42, section 3), so the
list is held to it both ways: the modules `ansible-doc -l awa.operations`
lists, the roles of `-t role -l`, no plugin of any other type (the role's
filters and internal modules live under ``__role/``, a folder ansible-doc
skips), each public module's options and their choices and suboptions, each
entry point's variables; and, where ansible-doc does not look, the playbooks,
the event source's arguments, the rulebooks, meta/runtime.yml's action
group and the role's set_stats outcome. No database.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import yaml

from enqueue_shards_support import ansible_command
from ansible_collections.awa.operations.plugins.plugin_utils.advice_events import SOURCE_DEFAULTS
from ansible_collections.awa.operations.plugins.plugin_utils.rollout import input_rules, record

COLLECTION = Path(__file__).resolve().parents[2]
INTERFACE = yaml.safe_load((COLLECTION / "docs" / "public_interface.yml").read_text(encoding="utf-8"))
PREFIX = "awa.operations."
# Plugin folders that hold no plugins of their own (shared code and documentation).
NOT_PLUGIN_FOLDERS = {"module_utils", "plugin_utils", "doc_fragments"}
# Types ansible-doc documents that are not plugins of a collection.
NOT_PLUGINS = {"keyword"}


def ansible_doc(*args: str) -> dict:
    process = ansible_command("ansible-doc", *args, "--json")
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout)


def surface(options: dict, nested: str) -> dict:
    """An ansible-doc options mapping as the list states it: names, choices, suboptions (``nested`` holds them)."""
    return {"options": sorted(options),
            "choices": {name: option["choices"] for name, option in options.items() if "choices" in option},
            "suboptions": {name: sorted(option[nested]) for name, option in options.items() if option.get(nested)}}


def listed(entry: dict, own_options: list[str]) -> dict:
    """A module or role entry of the list in the same shape, the connection options added where it says so."""
    connection = INTERFACE["connection"] if entry.get("connection") else {"options": [], "choices": {}}
    return {"options": sorted(own_options + connection["options"]),
            "choices": {**connection["choices"], **entry.get("choices", {})},
            "suboptions": {name: sorted(names) for name, names in entry.get("suboptions", {}).items()}}


def test_ansible_doc_lists_exactly_the_public_modules_and_roles_and_no_other_plugin():
    assert set(ansible_doc("-l", "awa.operations")) == set(INTERFACE["modules"])
    assert set(ansible_doc("-t", "role", "-l", "awa.operations")) == set(INTERFACE["roles"])
    assert ansible_doc("-t", "filter", "-l", "awa.operations") == {}
    # Every plugin type at once, as Galaxy's importer reads the collection.
    process = ansible_command("ansible-doc", "--metadata-dump", "--no-fail-on-errors", "awa.operations")
    assert process.returncode == 0, process.stderr
    dump = json.loads(process.stdout)["all"]
    assert {kind: set(names) for kind, names in dump.items() if names and kind not in NOT_PLUGINS} == {
        "module": set(INTERFACE["modules"]), "role": set(INTERFACE["roles"])}


def test_each_public_module_takes_exactly_the_options_and_choices_of_the_list():
    documented = ansible_doc(*INTERFACE["modules"])
    for name, entry in INTERFACE["modules"].items():
        assert surface(documented[name]["doc"]["options"], "suboptions") == listed(entry, entry["options"]), name


def test_the_role_s_entry_points_take_exactly_the_variables_of_the_list():
    for name, entry in INTERFACE["roles"].items():
        entry_points = ansible_doc("-t", "role", name)[name]["entry_points"]
        assert sorted(entry_points) == sorted(entry["entry_points"]), name
        for entry_point, variables in entry["entry_points"].items():
            shown = surface(entry_points[entry_point].get("options", {}), "options")
            expected = listed(entry, variables)
            # An entry point shows the choices and suboptions of the variables it takes.
            expected["choices"] = {key: value for key, value in expected["choices"].items() if key in variables}
            expected["suboptions"] = {key: value for key, value in expected["suboptions"].items() if key in variables}
            assert shown == expected, f"{name} entry point {entry_point}"


def test_the_keys_and_choices_the_role_s_validate_phase_holds_are_the_list_s_and_documented():
    """Left out of the spec (Ansible's check of it would print all of it for one typo), named in the descriptions."""
    entry = INTERFACE["roles"]["awa.operations.enqueue_shards"]
    prefix = input_rules.PREFIX
    assert {prefix + name: sorted(values) for name, values in input_rules.CHOICES.items()} == {
        name: sorted(values) for name, values in entry["validated_choices"].items()}
    assert {prefix + name: sorted(values) for name, values in input_rules.KEYS.items()} == {
        name: sorted(values) for name, values in entry["validated_keys"].items()}
    entry_points = ansible_doc("-t", "role", "awa.operations.enqueue_shards")["awa.operations.enqueue_shards"][
        "entry_points"]
    for markup, held in (("V", entry["validated_choices"]), ("C", entry["validated_keys"])):
        for variable, values in held.items():
            for name, shown in entry_points.items():
                if variable in shown["options"]:
                    text = " ".join(shown["options"][variable]["description"])
                    assert [value for value in values if f"{markup}({value})" not in text] == [], (name, variable)


def test_the_moved_options_are_the_internal_read_s_not_the_public_module_s():
    internal = ansible_doc("awa.operations.__role.enqueue_shards_rollout_info")[
        "awa.operations.__role.enqueue_shards_rollout_info"]["doc"]
    public = INTERFACE["modules"]["awa.operations.awa_enqueue_shards_info"]
    assert set(internal["options"]) - set(public["options"]) - set(INTERFACE["connection"]["options"]) == {
        "known_runtimes", "restarted_services", "expected_new_runtimes", "window_services", "delay"}
    assert internal["options"]["wait"]["choices"] == [*public["choices"]["wait"], "restarted"]


def test_every_plugin_not_listed_as_public_is_internal_under_a_private_folder():
    plugins = COLLECTION / "plugins"
    files = {path.relative_to(COLLECTION).as_posix() for path in plugins.rglob("*.py")
             if path.relative_to(plugins).parts[0] not in NOT_PLUGIN_FOLDERS and path.name != "__init__.py"}
    private = {path for path in files if "/__role/" in path}
    assert private == set(INTERFACE["internal"])
    public_modules = {name.removeprefix(PREFIX) for name in INTERFACE["modules"]}
    # The rest: the public modules, and the action plugins that run them.
    assert {Path(path).stem for path in files - private} == public_modules
    assert {Path(path).parts[1] for path in files - private} <= {"modules", "action"}
    internal_modules = [PREFIX + "__role." + Path(path).stem for path in private if path.startswith("plugins/modules/")]
    for name, documented in ansible_doc(*internal_modules).items():
        assert documented["doc"]["description"][0].startswith("B(Not a public interface.)"), name


def test_the_playbooks_are_the_list_s_with_their_groups_and_variables():
    playbooks = {PREFIX + path.stem: path for path in (COLLECTION / "playbooks").glob("*.yml")}
    assert set(playbooks) == set(INTERFACE["playbooks"])
    for name, entry in INTERFACE["playbooks"].items():
        text = playbooks[name].read_text(encoding="utf-8")
        for word in entry["inventory_groups"] + entry["variables"]:
            assert word in text, f"{name} does not name {word}"


def test_the_event_source_arguments_and_the_rulebooks_are_the_list_s():
    eda = COLLECTION / "extensions" / "eda"
    sources = {PREFIX + path.stem for path in (eda / "plugins" / "event_source").glob("*.py")}
    assert sources == set(INTERFACE["event_sources"])
    assert sorted(SOURCE_DEFAULTS) == INTERFACE["event_sources"]["awa.operations.shard_advice"]["arguments"]
    assert sorted(PREFIX + path.stem for path in (eda / "rulebooks").glob("*.yml")) == INTERFACE["rulebooks"]


def test_the_role_s_set_stats_outcome_has_the_list_s_keys():
    """A workflow gates on these names: the declaration (record.WindowOutcome) and the list agree, both ways."""
    [(name, entry)] = INTERFACE["set_stats"].items()
    assert name == record.OUTCOME_KEY
    declared = {"keys": record.WindowOutcome, "queues": record.QueueOutcome, "services": record.ServicesOutcome,
                "backout_queues": record.BackoutQueue}
    assert {part: sorted(typing.get_type_hints(shape)) for part, shape in declared.items()} == entry


def test_the_action_group_holds_the_list_s_modules_and_the_role_s_internal_read():
    runtime = yaml.safe_load((COLLECTION / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    for group, members in runtime["action_groups"].items():
        public = [member for member in members if not member.startswith(PREFIX + "__role.")]
        assert public == INTERFACE["action_groups"][group], group
        for member in set(members) - set(public):
            assert f"plugins/modules/__role/{member.rsplit('.', 1)[1]}.py" in INTERFACE["internal"], member
    assert set(runtime["action_groups"]) == set(INTERFACE["action_groups"])
