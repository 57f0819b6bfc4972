"""The benchmark charts of docs/performance.md (benchmarks/charts.py, benchmarks/svg.py): pure parts, no database.

The numbers a chart draws are checked against the tables of
docs/performance.md, read from the same recorded JSON; the charts in
docs/images must be what ``python -m benchmarks charts`` draws from the
newest JSON of each suite.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from benchmarks import charts, svg
from benchmarks.__main__ import summarize

RESULTS = Path(charts.RESULTS_DIR)


def run_of(name: str) -> charts.Run:
    path = RESULTS / name
    report = json.loads(path.read_text(encoding="utf-8"))
    return charts.Run(path, datetime.datetime.fromisoformat(report["started_at"]), report)


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0, 442.5, [0, 100, 200, 300, 400, 500]),
    (0, 37.3, [0, 10, 20, 30, 40]),
    (0, 1.2, [0, 0.5, 1.0, 1.5]),
    (0, 0, [0]),
])
def test_ticks_are_round_and_cover_the_range(low, high, expected):
    assert svg.ticks(low, high) == expected


def test_a_scale_maps_the_interval_and_may_run_backwards():
    upward = svg.Scale(0, 500, 360, 60)
    assert (upward(0), upward(250), upward(500)) == (360, 210, 60)
    assert svg.Scale(3, 3, 0, 100)(3) == 50


def test_gain_colours_are_symmetric_on_a_log_scale_and_stop_at_the_limit():
    assert svg.gain_colour(1.0) == svg.GAIN_NEUTRAL
    assert svg.gain_colour(2.0, 2.0) == svg.GAIN_UP and svg.gain_colour(0.5, 2.0) == svg.GAIN_DOWN
    assert svg.gain_colour(9.0, 2.0) == svg.GAIN_UP, "beyond the limit the colour is full, no further"
    up, down = svg.gain_colour(1.5, 4.0), svg.gain_colour(1 / 1.5, 4.0)
    distance = [abs(int(colour[i:i + 2], 16) - int(svg.GAIN_NEUTRAL[i:i + 2], 16))
                for colour in (up, down) for i in (1, 3, 5)]
    assert sum(distance[:3]) > 0 and sum(distance[3:]) > 0 and up != down
    assert svg.text_ink(svg.GAIN_UP) == "#ffffff" and svg.text_ink(svg.GAIN_NEUTRAL) == svg.INK


def test_text_is_escaped_and_a_document_is_well_formed():
    document = svg.document(100, 50, "a < b & c", "desc", [svg.text(1, 2, "x <y> & z"), svg.rect(0, 0, 1, 1, "#fff")])
    root = ElementTree.fromstring(document)
    assert root.find("{http://www.w3.org/2000/svg}text").text == "x <y> & z"
    assert root.find("{http://www.w3.org/2000/svg}title").text == "a < b & c"


def test_each_suite_is_drawn_from_its_newest_run(tmp_path):
    def run(name: str, started: str, results: dict) -> charts.Run:
        return charts.Run(tmp_path / name, datetime.datetime.fromisoformat(started), {"results": results})

    older = run("a.json", "2026-11-29T11:55:00+00:00", {"17": {"impact": {"result": {}}, "fleet": {"result": {}}}})
    newer = run("b.json", "2026-12-01T17:53:00+00:00", {"18": {"fleet": {"result": {}}}})
    broken = run("c.json", "2026-12-02T00:00:00+00:00", {"18": {"fleet": {"error": "interrupted"}}})
    newest = charts.newest_per_suite([newer, broken, older])
    assert newest == {"impact": older, "fleet": newer}


def test_a_scratch_run_redraws_nothing(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("/results/*\n!/results/recorded.json\n", encoding="utf-8")
    results = tmp_path / "results"
    results.mkdir()
    paths = [results / "recorded.json", results / "scratch.json"]
    assert charts.recorded(paths) == [results / "recorded.json"]
    outside = tmp_path.parent / f"{tmp_path.name}-not-a-checkout"
    outside.mkdir()
    assert charts.recorded([outside / "run.json"]) == [outside / "run.json"]


def test_the_heat_map_holds_the_tables_numbers():
    result = run_of("20261201T-shard-choice.json").results("shard_choice")[17]
    grid = {(cell.producers, cell.shards): cell for cell in charts.gain_grid(result, "insert")}
    # docs/performance.md section 5 and the run's tables (--tables): PG 17, insert, 1 producer 155 jobs/s at S=1; 16 x1.64 at S=8.
    assert round(grid[(1, 1)].jobs_per_s) == 155 and grid[(1, 1)].gain is None
    assert round(grid[(16, 8)].gain, 2) == 1.64
    assert charts.cell_label(grid[(16, 8)]) == "x1.64" and charts.cell_label(grid[(1, 1)]) == "155/s"
    keyed = {(cell.producers, cell.shards): cell for cell in charts.gain_grid(result, "copy_keyed")}
    assert round(keyed[(16, 8)].gain, 2) == 0.25


def test_the_fleet_chart_holds_the_tables_numbers_and_marks_a_busy_machine():
    series = charts.fleet_series(run_of("20261201T175356Z.json").results("fleet")[18])
    # docs/performance-history.md, 0.2.0: 3 hosts, 1 queue: role 52.5 s, floor 12.6 s; 6 hosts: 251.8 s; busy 0.9-1.0.
    role = {point.hosts: point for point in series[("role", 1)]}
    floor = {point.hosts: point for point in series[("floor", 1)]}
    assert (round(role[3].seconds, 1), round(role[6].seconds, 1), round(floor[3].seconds, 1)) == (52.5, 251.8, 12.6)
    assert not role[3].counted and charts.FleetPoint(3, 10.0, 0.5).counted
    assert not charts.FleetPoint(3, 10.0, 0.5, complete=False).counted


def test_the_fleet_chart_says_why_its_hollow_markers_do_not_count():
    run = run_of("20261202T192542Z.json")
    # docs/performance.md section 6: no cell of the 0.3.0 run counts; the 24-host runs did not complete (rc 2).
    series = charts.fleet_series(run.results("fleet")[18])
    assert not any(point.counted for points in series.values() for point in points)
    assert {point.hosts for point in series[("role", 1)] if not point.complete} == {24}
    texts = [element.text for element in ElementTree.fromstring(charts.fleet_chart(run)).iter()
             if element.tag.endswith("text")]
    note = " ".join(text for text in texts if text)
    assert "Hollow: not counted" in note and "measures the overload, not the playbook" in note
    assert "the 24-host runs did not complete" in note
    assert charts.uncounted_note([charts.FleetPoint(3, 10.0, 0.5)]) == []


def test_the_latency_chart_holds_the_tables_numbers():
    latencies = {arm.arm: arm for arm in charts.arm_latencies(run_of("20261129T115509Z.json").results("impact")[17])}
    # docs/performance.md section 2, PostgreSQL 17: p50/p99 of each arm, the raw upsert's 22 failed calls.
    assert (round(latencies["awa_enqueue_shards"].p50, 1), round(latencies["awa_enqueue_shards"].p99, 1)) == (16.7, 31.7)
    assert latencies["raw upsert"].errors == 22 and latencies["awa_enqueue_shards"].errors == 0


def test_the_charts_in_the_docs_are_drawn_from_the_newest_results():
    drawn = charts.render_all(charts.load_runs(RESULTS))
    assert set(drawn) == set(charts.CHARTS)
    for name, content in drawn.items():
        ElementTree.fromstring(content)
        shown = charts.IMAGES_DIR / name
        assert shown.exists() and shown.read_text(encoding="utf-8") == content, \
            f"docs/images/{name} is not drawn from the newest results: run python -m benchmarks charts"


def test_the_recorded_results_are_summaries_and_stay_small():
    # Issue 59: a results file keeps each suite's summary (what the tables and charts read, a fixed point of
    # summarize), and says where its raw samples are; benchmarks/results at most 2 MB.
    recorded = charts.recorded(sorted(RESULTS.glob("*.json")))
    for path in recorded:
        report = json.loads(path.read_text(encoding="utf-8"))
        assert summarize(report) == report and report["raw"], path.name
    assert sum(path.stat().st_size for path in recorded) <= 2_000_000
