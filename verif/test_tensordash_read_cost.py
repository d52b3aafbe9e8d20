"""The cycle cost of a partial-sum reduction serialised over reads (sim/tensordash/read_cost.py), by hand."""
import numpy as np

from trainforge.golden.tensordash.layer import layer_cycles, lower, pass_cycles
from trainforge.sim.tensordash.read_cost import fold_extra, shared_reducer_extra, with_design


def test_shared_reducer_stops_for_passes_shorter_than_its_pes_worked_by_hand():
    # 16 PEs, one per cycle: a pass of c < 16 cycles waits 16 - c; the first pass waits for nothing.
    assert shared_reducer_extra([4, 5, 3, 16, 15, 40], pes=16) == 11 + 13 + 0 + 1 + 0
    assert shared_reducer_extra([7], pes=16) == 0
    assert shared_reducer_extra([1, 1, 1], pes=1) == 0


def test_fold_costs_its_additions_on_every_pass():
    assert fold_extra([4, 5, 3], per_read=7) == 21
    designs = with_design(np.array([4, 20]), np.array([16, 16]), pes=16)
    assert designs["shared"] == (4 + 20 + 0, 32 + 0)
    assert designs["fold, interleaved (>=)"] == (24 + 14, 32 + 14)


def test_pass_cycles_are_the_layer_cycles_pass_by_pass():
    generator = np.random.default_rng(5)
    activations = np.maximum(generator.standard_normal((2, 3, 6, 6)), 0)
    weights = generator.standard_normal((5, 3, 3, 3))
    gradients = np.maximum(generator.standard_normal((2, 5, 6, 6)), 0)
    for operation in ("AxW", "GxA"):
        lowered = lower(operation, activations, weights, gradients, 1, 1)
        for max_rows in (1024, 3):  # 3: every dot product cut into parts
            tensordash, dense = pass_cycles(lowered, max_rows=max_rows)
            totals = layer_cycles(lowered, max_rows=max_rows)
            assert (tensordash.sum(), dense.sum()) == (totals.tensordash, totals.dense)
            assert (tensordash >= 1).all() and (tensordash <= dense).all()
