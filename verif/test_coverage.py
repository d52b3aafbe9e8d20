"""The coverage tool (``trainforge.coverage`` and the coverage mode of ``trainforge.simulation``) on ``stream_stage``.

Each test keeps its runs in its own folder (``simulation.COVERAGE_RUNS`` is
pointed at a temporary one), so ``make coverage``'s runs are not touched. The
coverage build of ``stream_stage`` is made once (about 15 s) and then cached
like every simulation build; the runs take about a second each.
"""
import json
import pathlib
import shutil

import pytest

from trainforge import coverage, simulation

pytestmark = [
    pytest.mark.xdist_group("coverage_tool"),
    pytest.mark.skipif(shutil.which("verilator") is None or shutil.which("verilator_coverage") is None,
                       reason="needs Verilator (make simulators)"),
]

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Coverage mode on, with the runs kept in a temporary folder."""
    monkeypatch.setenv(simulation.COVERAGE_ENV, "1")
    monkeypatch.setattr(simulation, "COVERAGE_RUNS", tmp_path / "runs")
    return tmp_path / "runs"


def _amaranth_line(text):
    """``hw/stream_stage.py:N`` of the line of the stage's source that contains ``text``."""
    source = ROOT / "hw" / "stream_stage.py"
    numbers = [n for n, line in enumerate(source.read_text().splitlines(), 1) if text in line]
    assert len(numbers) == 1, f"{text!r} is not on exactly one line of {source}"
    return f"hw/stream_stage.py:{numbers[0]}"


def test_coverage_mode_keeps_a_dat_with_line_points(runs, seed):
    simulation.run("stream_stage", "tb_stream_stage", {}, "verilator", seed, testcase="scenario_table")
    dats = sorted((runs / "stream_stage").glob("*.dat"))
    assert len(dats) == 1, f"one run should keep one coverage.dat, found {dats}"
    points = coverage.read_points(dats[0])
    pages = {point.page for point in points}
    assert {"v_line", "v_branch", "v_toggle"} <= pages, f"expected line, branch and toggle points, got {pages}"
    reached = [p for p in points if p.page in coverage.LINE_PAGES and p.count > 0]
    assert reached, "no line point was reached by a run of the whole scenario table"
    # The coverage build has a folder of its own: the normal Verilator build's cache stays as it is.
    source = pathlib.Path(points[0].file)
    assert source.parent.name.endswith("-verilator-coverage") and source.exists(), source
    record = coverage.runs_by_block(runs)["stream_stage"][0][1]
    assert record["source"] == str(source) and record["params"] == {"width": 8}, record


def test_merge_adds_the_counts_of_two_runs(runs, seed, tmp_path):
    for run_seed in (seed, seed + 1):
        simulation.run("stream_stage", "tb_stream_stage", {}, "verilator", run_seed, testcase="scenario_table")
    first, second = (coverage.read_points(dat) for dat in sorted((runs / "stream_stage").glob("*.dat")))
    merged = coverage.read_points(coverage.merge_dats(
        sorted((runs / "stream_stage").glob("*.dat")), tmp_path / "merged.dat"))
    counts = [{p.key: p.count for p in points} for points in (first, second, merged)]
    assert set(counts[2]) == set(counts[0]) == set(counts[1])
    assert counts[0] != counts[1], "two seeds gave the same counts: the sum below would prove nothing"
    wrong = {key: (counts[0][key], counts[1][key], counts[2][key]) for key in counts[2]
             if counts[2][key] != counts[0][key] + counts[1][key]}
    assert not wrong, f"merged counts are not the sums of the runs' counts: {list(wrong.values())[:5]}"


def test_summary_flags_the_skid_buffer_unreached_without_backpressure(runs, seed, tmp_path):
    simulation.run("stream_stage", "tb_coverage_stream_stage", {}, "verilator", seed)
    alone = coverage.merge_block("stream_stage", coverage.runs_by_block(runs)["stream_stage"], tmp_path / "alone",
                                 html=False)
    assert alone["line_percent"] < 100, alone
    missed = {row["amaranth"] for row in alone["uncovered"]}
    for signal in ("skid_valid = Signal(", "skid_payload = Signal("):
        assert _amaranth_line(signal) in missed, f"{signal!r} not among the uncovered lines' sources: {missed}"
    assert all(row["verilog"] and coverage.STARTUP_TRIGGER not in row["verilog"] for row in alone["uncovered"])
    # The scenario table has backpressure: merged with it, the same lines are reached.
    simulation.run("stream_stage", "tb_stream_stage", {}, "verilator", seed, testcase="scenario_table")
    both = coverage.merge_block("stream_stage", coverage.runs_by_block(runs)["stream_stage"], tmp_path / "both",
                                html=shutil.which("genhtml") is not None)
    assert both["runs"] == 2 and both["lines"] == alone["lines"]
    assert both["line_percent"] == 100 and not both["uncovered"], both["uncovered"]
    assert (tmp_path / "both" / "coverage.info").read_text().count("DA:") == both["lines"]
    if shutil.which("genhtml") is not None:
        assert (tmp_path / "both" / "html" / "index.html").exists()


def test_report_index_has_the_coverage_figures_and_not_the_html(tmp_path):
    from trainforge import report

    reports = tmp_path / "reports"
    summary = {"block": "stream_stage", "runs": 1, "lines": 48, "lines_hit": 32, "line_percent": 66.67,
               "toggles": 60, "toggles_hit": 42, "toggle_percent": 70.0, "files": [],
               "html": "stream_stage/html/index.html",
               "uncovered": [{"file": "build/sim/x/stream_stage.v", "params": {"width": 8}, "line": 70,
                              "verilog": "\\$4  = 1'h1;", "amaranth": "hw/stream_stage.py:63"}]}
    (reports / "coverage" / "stream_stage" / "html").mkdir(parents=True)
    for name in ("gcov.css", "index.html", "ruby.png"):
        (reports / "coverage" / "stream_stage" / "html" / name).write_text("genhtml's")
    (reports / "coverage" / "summary.json").write_text(
        json.dumps({"kind": "coverage", "blocks": [summary]}))
    (reports / "coverage" / "coverage.md").write_text(coverage.markdown([summary]))
    text = report.write_index(reports).read_text()
    assert "stream_stage line coverage (%) | 66.67" in text
    assert "stream_stage toggle coverage (%) | 70" in text
    assert "| stream_stage.v | 70 | `\\$4  = 1'h1;` | hw/stream_stage.py:63 | width=8 |" in text
    assert "ruby.png" not in text, "genhtml's images are listed as plots"
    # The table's link to the HTML holds from the index's folder.
    assert "[stream_stage/html](coverage/stream_stage/html/index.html)" in text


def test_the_command_writes_a_summary_that_meets_its_schema(runs, seed, tmp_path):
    from trainforge import schemas
    from trainforge.cli import main

    simulation.run("stream_stage", "tb_coverage_stream_stage", {}, "verilator", seed)
    out = tmp_path / "coverage"
    assert main(["coverage", "--runs", str(runs), "--no-html", "--out", str(out), "stream_stage"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert schemas.kind_of(str(out / "summary.json")) == "coverage"
    assert schemas.errors(summary, "coverage") == []
    broken = dict(summary, blocks=[{**summary["blocks"][0], "line_percent": 120}])
    assert schemas.errors(broken, "coverage"), "a line coverage above 100 % meets the schema"
    # make report checks it against its schema (it said "no schema" while the schema existed).
    from trainforge import report

    index = report.write_index(tmp_path).read_text()
    assert "- [coverage/summary.json](coverage/summary.json): coverage, matches its schema" in index, index
