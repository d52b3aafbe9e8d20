"""The hand-worked scheduler vectors of ``verif/scenarios/td_scheduler.py`` (:data:`FIG6_CASES`) are discriminating.

The vectors themselves are checked against the golden model by ``verif/test_scenarios.py -k td_scheduler`` and
against the RTL by ``verif/test_rtl.py -k td_scheduler``. Here the golden scheduler is run with the paper's
options in a wrong priority order (any two swapped) or with its levels in a wrong order: every such scheduler
must disagree with at least one hand-worked vector, so the table would catch it.
"""
import itertools

import numpy as np
import pytest

from trainforge.golden.tensordash.scheduler import schedule
from trainforge.spec.tensordash import lane_levels

import scenarios.td_scheduler as table


def _outcome(pattern, index_of, vector, levels):
    """The schedule of one table vector as a table item, MS given as indices of the paper's order."""
    z = np.array([[bool(vector["candidates"][row] >> lane & 1) for lane in range(4)] for row in range(4)])
    visible = np.array([bool(vector["visible"] >> row & 1) for row in range(4)])
    result = schedule(z, pattern, visible, levels=levels)
    return {"ms": [index_of[int(m)] if result.active[lane] else 0 for lane, m in enumerate(result.ms)],
            "active": sum(1 << lane for lane in range(4) if result.active[lane]),
            "chosen": [sum(1 << lane for lane in range(4) if result.chosen[row, lane]) for row in range(4)],
            "advance": int(result.advance)}


def _disagreeing(pattern, index_of, levels):
    return [name for name, vector, expected in table.FIG6_CASES
            if _outcome(pattern, index_of, vector, levels) != expected]


def test_the_golden_scheduler_agrees_with_every_hand_worked_vector():
    paper = table.PAPER_4X4
    assert _disagreeing(paper, list(range(8)), lane_levels(paper, 4)) == []


@pytest.mark.parametrize("first, second", list(itertools.combinations(range(1, 8), 2)))
def test_a_swapped_priority_fails_a_hand_worked_vector(first, second):
    order = list(range(8))
    order[first], order[second] = order[second], order[first]
    swapped = tuple(table.PAPER_4X4[k] for k in order)
    assert _disagreeing(swapped, order, lane_levels(table.PAPER_4X4, 4)), \
        f"options {first} and {second} swapped: no hand-worked vector disagrees"


def test_a_wrong_level_order_fails_a_hand_worked_vector():
    paper = table.PAPER_4X4
    assert _disagreeing(paper, list(range(8)), [(3,), (2,), (1,), (0,)])
