"""The headline results as SVG charts for docs/performance.md, drawn from the JSON in benchmarks/results.

    python -m benchmarks charts            # write docs/images/*.svg from the newest JSON of each suite
    python -m benchmarks charts --check    # exit 1 when a chart in docs/images is not what the JSON gives

Each chart reads the newest recorded run (by ``started_at``) that holds its
suite - a run .gitignore names, CONTRIBUTING.md: Record a benchmark run - so
recording a run of one suite redraws its chart and leaves the others as they
are, and a scratch run redraws nothing:

- shard-choice-gain.svg: the shard_choice matrix as a heat map, enqueue
  throughput gain over S=1 per path, producers N and shard count S;
- fleet-time.svg: the change window's time against producer hosts, the role
  beside the floor, per queue count; a hollow marker is a cell that does not
  count (the machine was busy 0.8 or more of a run, so its time measures the
  overload, or a run did not complete), and the chart says so under its axis;
- fleet-light-time.svg: the same for the light hosts of the fleet_light
  suite (benchmarks/fleet_light.py);
- producer-latency.svg: the producers' enqueue latency (p99 and p50) in the
  window around the switch, per arm of the producer impact suite.

Plain SVG text (benchmarks/svg.py), no plotting library; the drawing of
each chart is a pure function of its JSON, so the same JSON gives the same
file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import fleet_report, producer_impact, shard_choice_report, svg

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
IMAGES_DIR = ROOT / "docs" / "images"
# issue 26: a fleet cell run while the machine was busy this share of the time or more measures the overload.
SATURATED = 0.8


# ---------------------------------------------------------------------------
# Which run each chart reads


@dataclass(frozen=True)
class Run:
    """One results file: where it is, when it started, what it holds."""

    path: Path
    started_at: datetime.datetime
    report: dict

    def suites(self) -> set[str]:
        return {name for suites in self.report.get("results", {}).values()
                for name, measured in suites.items() if "result" in measured}

    def results(self, suite: str) -> dict[int, dict]:
        """PostgreSQL major -> the suite's result on that server."""
        return {int(major): suites[suite]["result"] for major, suites in self.report.get("results", {}).items()
                if "result" in suites.get(suite, {})}

    def source(self) -> str:
        return f"benchmarks/results/{self.path.name}, started {self.started_at:%Y-%m-%d %H:%M} UTC"


def newest_per_suite(runs: Iterable[Run]) -> dict[str, Run]:
    """suite -> the newest run that measured it (ties: the later file name)."""
    newest: dict[str, Run] = {}
    for run in sorted(runs, key=lambda run: (run.started_at, run.path.name)):
        for suite in run.suites():
            newest[suite] = run
    return newest


def recorded(paths: list[Path]) -> list[Path]:
    """The recorded runs among ``paths``: those .gitignore does not ignore (benchmarks/results keeps scratch runs
    too, which redraw nothing). Outside a git checkout, all of them."""
    if not paths:
        return paths
    check = subprocess.run(["git", "check-ignore", "--stdin"], cwd=paths[0].parent, capture_output=True, text=True,
                           input="\n".join(str(path) for path in paths), check=False)
    if check.returncode not in (0, 1):  # not a git checkout
        return paths
    ignored = set(check.stdout.splitlines())
    return [path for path in paths if str(path) not in ignored]


def load_runs(results_dir: Path) -> list[Run]:
    runs = []
    for path in recorded(sorted(results_dir.glob("*.json"))):
        report = json.loads(path.read_text(encoding="utf-8"))
        runs.append(Run(path, datetime.datetime.fromisoformat(report["started_at"]), report))
    return runs


# ---------------------------------------------------------------------------
# Shard choice: a heat map of the gain over S=1


CELL_W, CELL_H = 58, 26


@dataclass(frozen=True)
class HeatCell:
    producers: int
    shards: int
    jobs_per_s: float | None
    gain: float | None  # None at the baseline S and where nothing was measured


def gain_grid(result: dict, path: str) -> list[HeatCell]:
    """Every (producers, shards) cell of one path: median throughput and median gain over the lowest S."""
    cells = shard_choice_report.cells_of(result)
    matrix, grid = result["matrix"], []
    baseline = min(matrix["shards"])
    for producers in matrix["producers"]:
        for shards in matrix["shards"]:
            cell = cells.get((path, producers, shards))
            grid.append(HeatCell(producers, shards, cell["jobs_per_s"]["median"] if cell else None,
                                 cell["gain"]["median"] if cell and shards != baseline else None))
    return grid


def cell_label(cell: HeatCell) -> str:
    if cell.jobs_per_s is None:
        return "-"
    if cell.gain is None:
        return f"{cell.jobs_per_s:,.0f}/s"
    return f"x{cell.gain:.2f}"


def _heat_panel(x0: float, y0: float, title: str, grid: Sequence[HeatCell], producers: Sequence[int],
                shards: Sequence[int]) -> list[str]:
    parts = [svg.text(x0 + CELL_W * len(shards) / 2, y0 - 8, title, 13, "middle", "bold")]
    for row, count in enumerate(producers):
        parts.append(svg.text(x0 - 6, y0 + row * CELL_H + CELL_H / 2 + 4, str(count), 11, "end"))
    for column, count in enumerate(shards):
        parts.append(svg.text(x0 + column * CELL_W + CELL_W / 2, y0 + len(producers) * CELL_H + 15, f"S={count}",
                              11, "middle"))
    for cell in grid:
        row, column = producers.index(cell.producers), shards.index(cell.shards)
        fill = "#e8e8e8" if cell.gain is None else svg.gain_colour(cell.gain, GAIN_LIMIT)
        x, y = x0 + column * CELL_W, y0 + row * CELL_H
        parts.append(svg.rect(x, y, CELL_W - 2, CELL_H - 2, fill,
                              title=f"N={cell.producers}, S={cell.shards}: {cell_label(cell)}"))
        parts.append(svg.text(x + (CELL_W - 2) / 2, y + CELL_H / 2 + 3, cell_label(cell), 10.5, "middle",
                              fill=svg.text_ink(fill)))
    return parts


# The gain at which a cell's colour is full (and its inverse): the measured gains span about x0.2 to x2.4.
GAIN_LIMIT = 2.5


def _gain_legend(x0: float, y0: float) -> list[str]:
    gains = (0.4, 0.5, 0.67, 1.0, 1.5, 2.0, 2.5)
    parts = [svg.text(x0, y0 - 6, "gain over S=1 (median of the repeats' ratios; full colour at x2.5 and x0.4 and "
                                  "beyond)", 11)]
    for index, gain in enumerate(gains):
        fill = svg.gain_colour(gain, GAIN_LIMIT)
        parts.append(svg.rect(x0 + index * 44, y0, 42, 16, fill))
        parts.append(svg.text(x0 + index * 44 + 21, y0 + 12, f"x{gain:g}", 10, "middle", fill=svg.text_ink(fill)))
    return parts


def shard_choice_chart(run: Run) -> str:
    results = run.results("shard_choice")
    majors = sorted(results)
    first = results[majors[0]]["matrix"]
    paths, producers, shards = first["paths"], first["producers"], first["shards"]
    panel_w, panel_h = CELL_W * len(shards), CELL_H * len(producers)
    left, top, gap_x, gap_y = 60, 96, 34, 84
    width = left + len(paths) * (panel_w + gap_x) + 10
    height = top + len(majors) * (panel_h + gap_y) + 20
    body = [svg.text(12, 24, "Which shard count helps: enqueue throughput against S=1", 16, weight="bold"),
            svg.text(12, 42, f"real awa-pg producers enqueueing into one queue at S shards; {run.source()}", 11)]
    for row, major in enumerate(majors):
        y0 = top + row * (panel_h + gap_y)
        body.append(svg.text(12, y0 - 32, f"PostgreSQL {major}", 14, weight="bold"))
        body.append(svg.text(24, y0 + panel_h / 2, "producers N", 11, "middle", rotate=-90))
        for column, path in enumerate(paths):
            x0 = left + column * (panel_w + gap_x)
            body += _heat_panel(x0, y0, path, gain_grid(results[major], path), producers, shards)
    body += _gain_legend(left, height - 30)
    return svg.document(width, height, "Shard choice: enqueue throughput gain over S=1",
                        f"Heat map per PostgreSQL major and enqueue path: median enqueue throughput gain over S=1 for "
                        f"each producer count and shard count. Source: {run.source()}.", body)


# ---------------------------------------------------------------------------
# Fleet: the change window's time against hosts, role and floor


@dataclass(frozen=True)
class FleetPoint:
    """One kind's median seconds in one cell, and the cell's verdict (fleet_report.median_cells)."""

    hosts: int
    seconds: float
    busy: float  # the busiest run of the cell, role or floor
    complete: bool = True

    @property
    def counted(self) -> bool:
        """As the suite's tables count a cell: every run complete, and the machine busy under SATURATED in each."""
        return self.complete and self.busy < SATURATED


def fleet_series(result: dict) -> dict[tuple[str, int], list[FleetPoint]]:
    """(role or floor, queues) -> median seconds per host count, for the run's first Ansible configuration."""
    config = result["matrix"]["configs"][0]
    series: dict[tuple[str, int], list[FleetPoint]] = {}
    for (hosts, queues, cell_config), summary in sorted(fleet_report.median_cells(result["cells"]).items()):
        if cell_config != config:
            continue
        for kind in fleet_report.KINDS:
            series.setdefault((kind, queues), []).append(
                FleetPoint(hosts, summary[kind]["total"], summary["busy"], summary["complete"]))
    return series


def uncounted_note(points: Iterable[FleetPoint]) -> list[str]:
    """Why the hollow markers do not count, in the chart's own words (nothing when every cell counts)."""
    uncounted = [point for point in points if not point.counted]
    if not uncounted:
        return []
    incomplete = sorted({point.hosts for point in uncounted if not point.complete})
    note = [f"Hollow: not counted - the machine (controller, database and hosts alike) was busy {SATURATED:g} or more "
            "of the run,",
            "so its time measures the overload, not the playbook"
            + (f"; the {' and '.join(map(str, incomplete))}-host runs did not complete." if incomplete else ".")]
    return note


# The fleet charts: suite -> what its hosts are, in the chart's title.
FLEET_TITLES = {"fleet": "A change window at fleet scale: time against producer hosts",
                "fleet_light": "A change window on light producer hosts: time against hosts"}


def fleet_chart(run: Run, suite: str = "fleet") -> str:
    results = run.results(suite)
    title = FLEET_TITLES[suite]
    major = max(results)
    series = fleet_series(results[major])
    queue_counts = sorted({queues for dummy, queues in series})
    host_counts = sorted({point.hosts for points in series.values() for point in points})
    longest = max(point.seconds for points in series.values() for point in points)
    points = [point for series_points in series.values() for point in series_points]
    note = uncounted_note(points)
    left, top, plot_w, plot_h = 70, 60, 460, 300
    y_ticks = svg.ticks(0, longest)
    x = svg.Scale(0, max(host_counts), left, left + plot_w)
    y = svg.Scale(0, y_ticks[-1], top + plot_h, top)
    body = [svg.text(12, 24, title, 16, weight="bold"),
            svg.text(12, 42, f"PostgreSQL {major}; {run.source()}", 11)]
    for value in y_ticks:
        body += [svg.line(left, y(value), left + plot_w, y(value)),
                 svg.text(left - 6, y(value) + 4, svg.tick_label(value), 11, "end")]
    for hosts in host_counts:
        body += [svg.line(x(hosts), top + plot_h, x(hosts), top + plot_h + 5, svg.INK),
                 svg.text(x(hosts), top + plot_h + 18, str(hosts), 11, "middle")]
    body += [svg.line(left, top + plot_h, left + plot_w, top + plot_h, svg.INK),
             svg.text(left + plot_w / 2, top + plot_h + 36, "producer hosts", 12, "middle"),
             svg.text(18, top + plot_h / 2, "seconds", 12, "middle", rotate=-90)]
    for index, queues in enumerate(queue_counts):
        colour = svg.SERIES[index % len(svg.SERIES)]
        for kind, shape, dash in (("role", "circle", None), ("floor", "square", "6 4")):
            points = series.get((kind, queues), [])
            body.append(svg.polyline([(x(p.hosts), y(p.seconds)) for p in points], colour, dash=dash))
            body += [svg.marker(x(p.hosts), y(p.seconds), shape, colour, p.counted,
                                f"{kind}, {queues} queues, {p.hosts} hosts: {p.seconds:.1f} s, machine busy "
                                f"{p.busy:.2f}" + ("" if p.complete else ", did not complete"))
                     for p in points]
    legend_x, legend_y = left + plot_w + 24, top + 6
    for index, queues in enumerate(queue_counts):
        colour = svg.SERIES[index % len(svg.SERIES)]
        body += [svg.line(legend_x, legend_y + index * 18, legend_x + 22, legend_y + index * 18, colour, 3),
                 svg.text(legend_x + 28, legend_y + index * 18 + 4, f"{queues} queue{'s' if queues != 1 else ''}", 11)]
    key_y = legend_y + len(queue_counts) * 18 + 16
    body += [svg.polyline([(legend_x, key_y), (legend_x + 22, key_y)], svg.INK),
             svg.marker(legend_x + 11, key_y, "circle", svg.INK),
             svg.text(legend_x + 28, key_y + 4, "the role (the playbook)", 11),
             svg.polyline([(legend_x, key_y + 20), (legend_x + 22, key_y + 20)], svg.INK, dash="6 4"),
             svg.marker(legend_x + 11, key_y + 20, "square", svg.INK),
             svg.text(legend_x + 28, key_y + 24, "the floor (bare playbook)", 11),
             svg.marker(legend_x + 11, key_y + 42, "circle", svg.INK, filled=False),
             svg.text(legend_x + 28, key_y + 46, "not counted (below)", 11)]
    body += [svg.text(12, top + plot_h + 58 + index * 15, line, 11) for index, line in enumerate(note)]
    return svg.document(legend_x + 190, top + plot_h + 50 + 15 * len(note) + (8 if note else 0), title,
                        f"Wall time of the change-window playbook (the role) and of the floor, per queue count, against "
                        f"the number of producer hosts. Source: {run.source()}.", body)


# ---------------------------------------------------------------------------
# Producer impact: enqueue latency around the switch


@dataclass(frozen=True)
class ArmLatency:
    arm: str
    p50: float
    p99: float
    errors: int


def arm_latencies(result: dict) -> list[ArmLatency]:
    """Each arm's p50 and p99 over the windows of all its rounds (pooled by the suite's summary, as its table shows
    them), and the calls that failed in those windows."""
    latencies = []
    for arm in producer_impact.ARMS:
        runs = [run for run in result["arms"] if run["arm"] == arm]
        pooled = result["pooled"][arm]
        if pooled["calls"]:
            latencies.append(ArmLatency(arm, pooled["p50"], pooled["p99"], sum(run["window_errors"] for run in runs)))
    return latencies


def producer_latency_chart(run: Run) -> str:
    results = run.results("impact")
    majors = sorted(results)
    groups = {major: arm_latencies(results[major]) for major in majors}
    arms = list(producer_impact.ARMS)
    bar_w, bar_gap, group_gap = 46, 10, 50
    group_w = len(arms) * (bar_w + bar_gap)
    left, top, plot_h = 70, 84, 260
    highest = max(arm.p99 for latencies in groups.values() for arm in latencies)
    y_ticks = svg.ticks(0, highest)
    y = svg.Scale(0, y_ticks[-1], top + plot_h, top)
    plot_w = len(majors) * (group_w + group_gap)
    traffic = results[majors[0]]["traffic"]
    body = [svg.text(12, 24, f"What live producers see: enqueue latency around the switch, S 1 -> "
                             f"{results[majors[0]]['target_shards']}", 16, weight="bold"),
            svg.text(12, 42, f"bars: p99, white tick: p50 of the calls started from {traffic['window_before']:g} s "
                             f"before the switch to {traffic['window_after']:g} s after it, every round; below: the "
                             "calls that failed there", 11),
            svg.text(12, 58, run.source(), 11)]
    for value in y_ticks:
        body += [svg.line(left, y(value), left + plot_w, y(value)),
                 svg.text(left - 6, y(value) + 4, svg.tick_label(value), 11, "end")]
    body.append(svg.text(18, top + plot_h / 2, "enqueue call latency, ms", 12, "middle", rotate=-90))
    for group, major in enumerate(majors):
        x0 = left + group_gap / 2 + group * (group_w + group_gap)
        body.append(svg.text(x0 + group_w / 2, top + plot_h + 50, f"PostgreSQL {major}", 12, "middle", "bold"))
        for arm in groups[major]:
            index = arms.index(arm.arm)
            colour = svg.SERIES[index % len(svg.SERIES)]
            x = x0 + index * (bar_w + bar_gap)
            body += [svg.rect(x, y(arm.p99), bar_w, y(0) - y(arm.p99), colour,
                              title=f"PostgreSQL {major}, {arm.arm}: p99 {arm.p99:.1f} ms, p50 {arm.p50:.1f} ms"),
                     svg.line(x + 4, y(arm.p50), x + bar_w - 4, y(arm.p50), "#ffffff", 2),
                     svg.text(x + bar_w / 2, y(arm.p99) - 5, f"{arm.p99:.1f}", 11, "middle"),
                     svg.text(x + bar_w / 2, top + plot_h + 16, str(index + 1), 11, "middle"),
                     svg.text(x + bar_w / 2, top + plot_h + 30, f"{arm.errors} failed", 10, "middle",
                              fill=svg.SERIES[1] if arm.errors else svg.INK)]
    body.append(svg.line(left, y(0), left + plot_w, y(0), svg.INK))
    legend_x = left + plot_w + 20
    for index, arm in enumerate(arms):
        body += [svg.rect(legend_x, top + index * 20, 14, 14, svg.SERIES[index % len(svg.SERIES)]),
                 svg.text(legend_x + 20, top + index * 20 + 11, f"{index + 1} {arm}", 11)]
    return svg.document(max(legend_x + 170, 760), top + plot_h + 64, "Producers' enqueue latency around the switch",
                        f"p99 and p50 enqueue latency of the producers in the window around the shard-count switch, "
                        f"per arm (baseline, raw upsert, awa_enqueue_shards) and PostgreSQL major. "
                        f"Source: {run.source()}.", body)


# ---------------------------------------------------------------------------
# The command


CHARTS: dict[str, tuple[str, Callable[[Run], str]]] = {
    "shard-choice-gain.svg": ("shard_choice", shard_choice_chart),
    "fleet-time.svg": ("fleet", fleet_chart),
    "fleet-light-time.svg": ("fleet_light", lambda run: fleet_chart(run, "fleet_light")),
    "producer-latency.svg": ("impact", producer_latency_chart),
}


def render_all(runs: Iterable[Run]) -> dict[str, str]:
    """file name -> SVG text, each chart from the newest run of its suite (a suite never measured: no chart)."""
    newest = newest_per_suite(runs)
    return {name: draw(newest[suite]) for name, (suite, draw) in CHARTS.items() if suite in newest}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks charts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results JSON (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=IMAGES_DIR, help="folder for the SVG files (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a chart is not current")
    args = parser.parse_args(argv)
    charts = render_all(load_runs(args.results))
    stale = [name for name, content in charts.items()
             if not (args.output / name).exists() or (args.output / name).read_text(encoding="utf-8") != content]
    if args.check:
        for name in stale:
            print(f"{args.output / name} is not drawn from the newest results: run python -m benchmarks charts")
        return 1 if stale else 0
    args.output.mkdir(parents=True, exist_ok=True)
    for name, content in charts.items():
        (args.output / name).write_text(content, encoding="utf-8")
        print(f"{'wrote' if name in stale else 'unchanged'} {args.output / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
