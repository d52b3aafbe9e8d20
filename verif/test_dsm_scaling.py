"""Timestep pipelining on whole sub-tori, and time that never rises with more chips."""
import itertools

import pytest

from trainforge.sim.dsm.arch import default_architecture
from trainforge.sim.dsm.explore import Optimizations, _chunk_counts, _pipe_chunks, _pipe_groups, explore
from trainforge.sim.dsm.workload import BUILTINS, gnmt

#: Chip counts of ``trainforge dsm sweep scaling`` (X fixed at 4) and its minibatch.
SWEEP_CHIPS = (16, 32, 64, 128, 256)
SWEEP_MINIBATCH = 512
#: Every combination of the four switches ``trainforge dsm explore`` offers (``--all`` is the last).
SETTINGS = list(itertools.product((False, True), repeat=4))
#: The settings of the default run (none, pipelining alone, all); the other 13 run in make regress.
DEFAULT_SETTINGS = {(False,) * 4, (False, False, False, True), (True,) * 4}


def _chips(chips):
    return default_architecture().with_changes(**{"system.chips_y": chips // 4})


def test_pipe_chunks_are_consecutive_and_even():
    assert _pipe_chunks(list(range(16)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert _pipe_chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert _pipe_chunks(list(range(5)), 1) == [[0, 1, 2, 3, 4]]
    # 16 layers on 4 rows need 4 chunks at least (one row per layer); 8 chunks of 2 are also tried.
    assert _chunk_counts(16, 4) == [4, 8]
    assert _chunk_counts(8, 64) == [1, 2, 4]
    assert _chunk_counts(3, 2) == [2]


def test_stages_are_whole_rows_and_keep_hybrid_parallelism():
    # 4 x 17 chips: 17 rows is prime, which used to give 1 x 17 stages that fell back to Data.
    arch = default_architecture().with_changes(**{"system.chips_y": 17})
    result = explore(gnmt(512), arch, Optimizations(True, True, False, True))
    pipelined = [layer for layer in result.layers if layer.pipelined]
    assert pipelined
    for layer in pipelined:
        assert layer.chips % 4 == 0, (layer.name, layer.chips)
    # Each pipe group has fewer layers than rows: one chunk per group, its rows summing to the 17 rows.
    groups = _pipe_groups(gnmt(512))
    assert all(len(group) <= 17 for group in groups)
    assert sum(layer.chips for layer in pipelined) == 68 * len(groups)
    hybrid = {"DataXModelY", "ModelXDataY"}
    at_256 = explore(gnmt(512), _chips(256), Optimizations(True, True, False, True))
    assert hybrid & {layer.parallelism for layer in at_256.layers if layer.pipelined}


@pytest.mark.parametrize("network", sorted(BUILTINS))
@pytest.mark.parametrize("flags", [pytest.param(flags, marks=() if flags in DEFAULT_SETTINGS else pytest.mark.regress)
                                   for flags in SETTINGS],
                         ids=lambda f: "".join("HMDT"[i] if on else "-" for i, on in enumerate(f)))
def test_time_never_rises_with_more_chips(network, flags):
    workload = BUILTINS[network](SWEEP_MINIBATCH)
    cycles = [explore(workload, _chips(chips), Optimizations(*flags)).cycles for chips in SWEEP_CHIPS]
    for fewer, more, chips in zip(cycles, cycles[1:], SWEEP_CHIPS[1:]):
        assert more <= fewer * (1 + 1e-9), f"{network} {flags}: {fewer:.4g} cycles -> {more:.4g} at {chips} chips"
