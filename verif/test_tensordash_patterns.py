"""Connectivity-pattern search (``sim/tensordash/patterns.py``, ``trainforge tensordash patterns``) and named patterns.

The full search runs behind the command line (minutes); here: the search on tiny spaces whose best pattern and
scores are known by hand, the size of the 4 x 4 space, the order rule, the named patterns, and a tiny command
run whose report must match its schema (and a broken copy must not).
"""
import copy
import json
import math

import numpy as np
import pytest

from trainforge.cli import main
from trainforge.errors import ParameterError
from trainforge.sim.tensordash import patterns
from trainforge.spec.tensordash import SCHEDULER_PARAMS, lane_levels, resolve_pattern
from trainforge.spec.tensordash_patterns import NAMED_PATTERNS


def _column0_workload(lanes, depth, rows=64):
    """Every stream row has one effectual pair, on lane 0: a pattern that reaches (1, 0) from another lane
    drains two rows a cycle."""
    effectual = np.zeros((3, 1, rows, lanes), dtype=bool)
    effectual[..., 0] = True
    clear, read = np.zeros(rows, bool), np.zeros(rows, bool)
    clear[0], read[-1] = True, True
    return patterns.Workload("column 0", effectual, clear, read, tile={"rows": 1, "lanes": lanes, "depth": depth})


def test_a_tiny_search_finds_the_known_best():
    # 2 lanes, 2 deep, 2 options: (0,0) and one of (0,1), (1,0), (1,1). With pairs on lane 0 only:
    # (0,1) and (1,0) leave lane 1 idle (1 row a cycle); (1,1) lets lane 1 take (1, 1+1 mod 2) = (1,0): 2 rows.
    workload = _column0_workload(2, 2)
    space = {"lanes": 2, "depth": 2, "options": 2, "max_levels": 2, "universe": {}}
    result = patterns.search("tiny", space=space, screen_workloads=[workload], final_workloads=[workload],
                             finalists=3, refine_rounds=1, epochs=0)
    assert result.space["sets"] == 3 and result.space["admissible_sets"] == 3
    assert result.best["pattern"] == "0:0,1:1"
    assert result.best["scores"] == {"column 0": 2.0}
    assert {entry["pattern"]: entry["screen_geometric_mean"] for entry in result.screened} == {
        "0:0,1:1": 2.0, "0:0,0:1": 1.0, "0:0,1:0": 1.0}


def test_the_refinement_fixes_a_bad_priority():
    # 4 lanes, 2 deep, options (0,0), (1,0), (1,1): levels [0, 2], [1, 3]. Stream rows alternate
    # {lanes 1, 2} and {lanes 0, 1}. Window {1,2} / {0,1}:
    # - rule order (1,0) before (1,1): lane 0 takes (1,0), lane 2 (0,2); lane 1 (0,1); lane 3 reaches
    #   (1,3) and (1,0), both empty now: (1,1) is left, 1 row drained this cycle;
    # - refined order (1,1) before (1,0): lane 0 takes (1,1), lane 2 (0,2); lane 1 (0,1); lane 3 takes
    #   (1,0) as its (1, 3+1): both rows drained every cycle, speedup exactly 2.
    rows = 64
    effectual = np.zeros((2, 1, rows, 4), dtype=bool)
    effectual[:, :, 0::2, 1:3] = True
    effectual[:, :, 1::2, 0:2] = True
    clear, read = np.zeros(rows, bool), np.zeros(rows, bool)
    clear[0], read[-1] = True, True
    workload = patterns.Workload("alternating", effectual, clear, read, tile={"rows": 1, "lanes": 4, "depth": 2})
    space = {"lanes": 4, "depth": 2, "options": 3, "max_levels": 2, "slots": ((1, 0), (1, 1))}
    unrefined = patterns.search("order", space=space, screen_workloads=[workload], final_workloads=[workload],
                                finalists=1, refine_rounds=0, epochs=0)
    assert unrefined.space["sets"] == 1 and unrefined.best["pattern"] == "0:0,1:0,1:1"
    assert unrefined.best["scores"]["alternating"] < 1.9
    refined = patterns.search("order", space=space, screen_workloads=[workload], final_workloads=[workload],
                              finalists=1, refine_rounds=1, epochs=0)
    assert refined.best["pattern"] == "0:0,1:1,1:0"
    assert refined.best["scores"] == {"alternating": 2.0}


def test_the_4x4_space_is_every_set_of_seven_slots():
    space = patterns.SHAPES["4x4"]
    slots = patterns.universe(4, 4)
    assert len(slots) == 15 and (0, 0) not in slots
    assert patterns.count_candidates(slots, 8, 4, len(lane_levels(space["levels_of"], 4))) == (math.comb(15, 7),) * 2
    assert len(lane_levels(space["levels_of"], 4)) == 4


def test_the_level_bound_rejects_sets():
    # 16 lanes: (1,0),(2,0) and lookasides up to 4 apart; at most 6 levels (the wide default's).
    space = patterns.SHAPES["16x3"]
    slots = patterns.universe(16, 3, **space["universe"])
    total, admissible = patterns.count_candidates(slots, 8, 16, 6, space["required"])
    assert total == math.comb(16, 5) and 0 < admissible < total


def test_the_paper_pattern_follows_the_order_rule():
    paper = ((0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, -1))  # (3, 3) is (3, -1) on 4 lanes
    assert patterns.heuristic_order(set(paper[1:]), 4) == paper
    assert patterns.canonical_offset(3, 4) == -1 and patterns.canonical_offset(2, 4) == 2
    assert patterns.canonical_offset(-2, 16) == -2 and patterns.canonical_offset(9, 16) == -7


@pytest.mark.parametrize("name, lanes, depth", [("paper", 4, 4), ("wide", 16, 3), ("searched-4x4", 4, 4),
                                                ("two-level-4x4", 4, 4), ("searched-16x3", 16, 3)])
def test_a_named_pattern_resolves_and_validates(name, lanes, depth):
    pattern = resolve_pattern(name, lanes, depth)
    assert pattern == NAMED_PATTERNS[name] and pattern[0] == (0, 0) and len(pattern) == 8
    params = SCHEDULER_PARAMS.resolve(lanes=lanes, depth=depth, pattern=name)
    assert params["pattern"] == name


def test_the_named_patterns_are_the_searched_ones():
    assert NAMED_PATTERNS["paper"] == ((0, 0), (1, 0), (2, 0), (3, 0), (1, 1), (1, -1), (2, 2), (3, 3))
    assert len(lane_levels(NAMED_PATTERNS["searched-4x4"], 4)) <= 4
    assert len(lane_levels(NAMED_PATTERNS["searched-16x3"], 16)) <= 6
    assert lane_levels(NAMED_PATTERNS["two-level-4x4"], 4) == [(0, 2), (1, 3)]


def test_four_lanes_never_need_three_levels():
    # Lanes 0 and 2 share no slot exactly when lanes 1 and 3 share none (the pattern is shift-invariant), and
    # likewise 0/1 and 2/3: the greedy levels of 4 lanes are 1, 2 or 4.
    counts = {len(lane_levels(pattern, 4))
              for pattern in patterns.candidate_sets(patterns.universe(4, 4), 8, 4, max_levels=4)}
    assert counts == {2, 4}


def test_a_named_pattern_of_another_shape_is_refused():
    with pytest.raises(ParameterError):
        resolve_pattern("searched-4x4", 4, 3)  # steps up to 3 need 4 rows
    with pytest.raises(ParameterError):
        resolve_pattern("no-such-pattern", 4, 4)


def test_the_command_writes_a_report_that_matches_its_schema(tmp_path, capsys):
    schemas = pytest.importorskip("trainforge.schemas")
    pytest.importorskip("jsonschema")
    argv = ["tensordash", "patterns", "--max-sets", "3", "--screen-samples", "2", "--screen-rows", "16",
            "--samples", "2", "--stream-rows", "16", "--epochs", "1", "--finalists", "1", "--refine-rounds", "0",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    report = json.loads((tmp_path / "patterns.json").read_text())
    assert schemas.errors(report, "tensordash_patterns") == []
    assert set(report["shapes"]) == {"4x4", "16x3"} and report["wide_vs_narrow"]["sparsity"] == 0.62
    assert report["shapes"]["4x4"]["references"]["paper"]["pattern"] == "0:0,1:0,2:0,3:0,1:1,1:-1,2:2,3:3"
    broken = copy.deepcopy(report)
    del broken["shapes"]["4x4"]["best"]["scores"]
    assert any(line.startswith("shapes/4x4/best:") for line in schemas.errors(broken, "tensordash_patterns"))
    broken = copy.deepcopy(report)
    broken["shapes"]["16x3"]["best"]["pattern"] = "0:0,1"
    assert schemas.errors(broken, "tensordash_patterns")


@pytest.mark.parametrize("argv", [["--samples", "0"], ["--sparsities", "1.0"], ["--max-sets", "0"],
                                  ["--refine-rounds", "-1"]])
def test_bad_arguments_are_refused(argv, tmp_path, capsys):
    assert main(["tensordash", "patterns", *argv, "--out", str(tmp_path / "out")]) == 2
    assert "patterns.json" not in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("searched, reference, lanes, depth", [("searched-4x4", "paper", 4, 4),
                                                               ("two-level-4x4", "paper", 4, 4),
                                                               ("searched-16x3", "wide", 16, 3)])
def test_the_searched_pattern_beats_its_reference_on_fresh_streams(searched, reference, lanes, depth):
    # 62 % sparsity, 4-row tile, a seed the search never used; the search measured +4.8 % (4x4) and +8 % (16x3).
    from trainforge.sim.tensordash import figures
    options = {"rows": 4, "lanes": lanes, "depth": depth, "samples": 16, "stream_rows": 256, "seed": 12345}
    assert figures.speedup(0.62, pattern=searched, **options) > 1.02 * figures.speedup(0.62, pattern=reference,
                                                                                        **options)
