"""Unit tests of the TensorDash golden models: patterns, scheduler, cycle model, transposer, parameters."""
import re

import numpy as np
import pytest

from trainforge.golden.dense_pe import dense_pe
from trainforge.golden.tensordash.core import pad_rows, run_cores
from trainforge.spec.tensordash import (default_pattern, lane_levels, option_slots,
                                                  parse_pattern, validate_pattern)
from trainforge.golden.tensordash.pe import td_pe, td_pe_cycles, td_tile_cycles
from trainforge.golden.tensordash.scheduler import schedule
from trainforge.golden.tensordash.transposer import transpose_blocks
from trainforge.errors import ParameterError
from trainforge.hw.tensordash.pe import TDPE


@pytest.mark.parametrize("text,reason", [
    ("0:0,1:0,1:0", "repeats"),
    ("0:0,1:1,1:5", "repeats"),          # 5 == 1 modulo 4 lanes
    ("0:0,4:0", "outside 0..3"),
    ("0:0,-1:0", "outside 0..3"),
    ("1:0,2:0", "no (0, 0)"),
    ("1:0,0:0", "must come first"),
    ("0:0,1", "step:offset"),
])
def test_invalid_patterns_are_rejected(text, reason):
    with pytest.raises(match=re.escape(reason)):
        validate_pattern(parse_pattern(text), 4, 4)


def test_block_rejects_invalid_pattern_naming_the_parameter():
    with pytest.raises(ParameterError, match="parameter 'pattern'"):
        TDPE(pattern="0:0,3:0", depth=2)


@pytest.mark.parametrize("lanes,depth,levels", [(4, 4, 4), (16, 3, 6), (4, 2, 4), (4, 5, 4)])
def test_levels_are_disjoint_and_counted(lanes, depth, levels):
    pattern = validate_pattern(default_pattern(lanes, depth), lanes, depth)
    found = lane_levels(pattern, lanes)
    assert sorted(lane for level in found for lane in level) == list(range(lanes))
    for level in found:
        slots = [set(option_slots(pattern, lanes, lane)) for lane in level]
        for i in range(len(slots)):
            for j in range(i):
                assert not slots[i] & slots[j], f"lanes {level[i]} and {level[j]} share a slot"
    assert len(found) == levels, f"expected {levels} levels, got {len(found)}: {found}"


def reference_schedule(z, visible, pattern):
    """Scalar re-statement of the rule: lanes one by one in lane order (levels only regroup disjoint lanes)."""
    depth, lanes = z.shape
    z = z & visible[:, None]
    ms, active = [0] * lanes, [False] * lanes
    levels = lane_levels(pattern, lanes)
    for lane in [lane for level in levels for lane in level]:
        for index, (row, column) in enumerate(option_slots(pattern, lanes, lane)):
            if z[row, column]:
                z[row, column] = False
                ms[lane], active[lane] = index, True
                break
    advance = 0
    while advance < depth and visible[advance] and not z[advance].any():
        advance += 1
    return ms, active, advance


@pytest.mark.parametrize("lanes,depth", [(4, 4), (16, 3), (4, 2), (8, 5)])
def test_scheduler_matches_scalar_reference(lanes, depth, seed):
    rng = np.random.default_rng(seed)
    pattern = validate_pattern(default_pattern(lanes, depth), lanes, depth)
    z = rng.random((500, depth, lanes)) < rng.random((500, 1, 1))
    visible = rng.random((500, depth)) < 0.8
    result = schedule(z, pattern, visible)
    for k in range(len(z)):
        ms, active, advance = reference_schedule(z[k].copy(), visible[k], pattern)
        assert result.ms[k].tolist() == ms and result.active[k].tolist() == active, \
            f"seed {seed} vector {k}: expected {ms}/{active}, got {result.ms[k].tolist()}/{result.active[k].tolist()}"
        assert result.advance[k] == advance, f"seed {seed} vector {k}: AS expected {advance} got {result.advance[k]}"
    visible_z = z & visible[..., None]
    assert np.array_equal(result.chosen | result.remaining, visible_z) and not (result.chosen & result.remaining).any()
    assert np.array_equal(result.chosen.sum(axis=(-2, -1)), result.active.sum(axis=-1))
    assert not result.remaining[visible[:, 0], 0].any(), "the head row must always drain"


@pytest.mark.parametrize("rows,lanes,depth", [(1, 4, 4), (4, 4, 4), (2, 16, 3), (3, 4, 2)])
def test_every_effectual_pair_multiplied_exactly_once(rows, lanes, depth, seed):
    rng = np.random.default_rng(seed)
    total = pad_rows(203, depth)
    effectual = rng.random((6, rows, total, lanes)) < rng.random((6, 1, 1, 1))
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    cuts = np.sort(rng.choice(np.arange(1, total), 12, replace=False))
    clear[0], clear[cuts] = True, True
    read[cuts - 1], read[-1] = True, True
    pattern = validate_pattern(default_pattern(lanes, depth), lanes, depth)
    run = run_cores(effectual, read, clear, pattern, depth, record=True)
    assert np.array_equal(run.multiplicity, effectual.astype(np.int64)), f"seed {seed}: multiplicity != effectual"
    assert np.array_equal(run.macs, effectual.sum(axis=(1, 2, 3)))
    assert (run.cycles >= total // depth).all() and (run.cycles <= total).all(), f"seed {seed}: {run.cycles}"
    assert (np.diff(run.read_cycles, axis=1) >= 0).all()


def test_dense_stream_takes_one_cycle_per_row_and_zeros_take_one_per_group():
    total = 64
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    clear[0], read[-1] = True, True
    ones = np.ones((total, 4), dtype=np.int64)
    assert td_pe_cycles(ones, ones, clear, read).cycles[0] == total
    zeros = np.zeros((total, 4), dtype=np.int64)
    assert td_pe_cycles(zeros, zeros, clear, read).cycles[0] == total // 4


def test_sparsity_reduces_cycles_and_results_stay_dense(seed):
    rng = np.random.default_rng(seed)
    total = 400
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    clear[::20], read[19::20] = True, True
    a = rng.integers(-128, 127, size=(total, 4))
    cycles = []
    for sparsity in (0.0, 0.5, 0.9):
        b = np.where(rng.random((total, 4)) < sparsity, 0, rng.integers(1, 127, size=(total, 4)))
        cycles.append(td_pe_cycles(a, b, clear, read, mode="b_only").cycles[0])
        assert np.array_equal(td_pe(a, b, clear, read), dense_pe(a, b, clear, read))
    assert cycles[0] > cycles[1] > cycles[2], f"seed {seed}: cycles {cycles} do not drop with sparsity"


def test_tile_is_never_faster_than_its_slowest_row(seed):
    rng = np.random.default_rng(seed)
    total = 256
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    clear[0], read[-1] = True, True
    b = np.where(rng.random((total, 4, 4)) < 0.7, 0, 1)
    b[:, 3] = np.where(rng.random((total, 4)) < 0.1, 0, 1)  # one dense row
    tile = td_tile_cycles(np.ones((total, 4, 4)), b, clear, read).cycles[0]
    slowest = max(td_pe_cycles(np.ones((total, 4)), b[:, r], clear, read, mode="b_only").cycles[0] for r in range(4))
    assert tile >= slowest, f"seed {seed}: tile {tile} cycles < slowest row {slowest}"


def test_transpose_blocks():
    blocks = np.arange(32).reshape(8, 4)
    out = transpose_blocks(blocks)
    assert out[0].tolist() == [0, 4, 8, 12] and out[5].tolist() == [17, 21, 25, 29]


def test_mac_units_are_the_spec_choices():
    """The RTL MAC units are exactly the ``mac`` choices of the spec, for the dense PE and TensorDash alike."""
    from trainforge.hw.mac import MAC_UNITS
    from trainforge.spec import dense_pe
    from trainforge.spec.tensordash import MAC_NAMES, PE_PARAMS, TILE_PARAMS

    assert tuple(MAC_UNITS) == MAC_NAMES
    assert PE_PARAMS["mac"].choices == TILE_PARAMS["mac"].choices == MAC_NAMES
    if "mac" in dense_pe.PARAMS.names:
        assert dense_pe.PARAMS["mac"].choices == MAC_NAMES


def _fp_stream(generator, shape, density, fmt):
    """Small integers (exact in FP16 and BF16, and so are their products and sums) at the given density."""
    from trainforge.golden.fp import to_bits

    values = generator.integers(-8, 9, shape).astype(np.float32)
    values[generator.random(shape) >= density] = 0
    return values, to_bits(values, fmt)


def _flags_of(total, ends):
    clear, read, start = np.zeros(total, bool), np.zeros(total, bool), 0
    for end in ends:
        clear[start], read[end - 1], start = True, True, end
    return clear, read


@pytest.mark.parametrize("mac", ["fp16", "bf16"])
@pytest.mark.parametrize("seed", range(3))
def test_fp_results_are_the_exact_dot_products_when_no_rounding_happens(mac, seed):
    """PE and tile FP results on small integers equal numpy's exact float64 dot products: every selected
    pair is multiplied once and added once, whatever the schedule."""
    from trainforge.golden.fp import from_bits
    from trainforge.golden.tensordash.pe import td_pe, td_tile
    from trainforge.spec.fp import FORMATS, FP32

    generator = np.random.default_rng(seed)
    fmt = FORMATS[mac]
    total = 53
    ends = [9, 10, 31, 53]
    clear, read = _flags_of(total, ends)
    a, a_bits = _fp_stream(generator, (total, 4), 0.8, fmt)
    b, b_bits = _fp_stream(generator, (total, 4), 0.4, fmt)
    starts = [0] + ends[:-1]
    want = [np.dot(a[s:e].ravel().astype(np.float64), b[s:e].ravel().astype(np.float64)) for s, e in zip(starts, ends)]
    assert from_bits(td_pe(a_bits, b_bits, clear, read, mac=mac), FP32).tolist() == want
    a, a_bits = _fp_stream(generator, (total, 3, 4), 0.9, fmt)
    b, b_bits = _fp_stream(generator, (total, 2, 4), 0.3, fmt)
    want = np.array([np.einsum("tcl,trl->rc", a[s:e].astype(np.float64), b[s:e].astype(np.float64))
                     for s, e in zip(starts, ends)])
    assert np.array_equal(from_bits(td_tile(a_bits, b_bits, clear, read, mac=mac), FP32), want)


def test_fp_results_follow_the_schedule_order():
    """Where rounding happens, the TensorDash PE adds each cycle's products as its schedule groups them,
    worked out by hand (bfloat16, the paper's pattern, A all ones).

    B rows: ``[2**24, 0, 0, 0]``, ``[0, 0, 1, 1]``, then two zero rows; one dot product, read at the
    last row. In one cycle lane 0 takes ``2**24`` (option ``(0, 0)``),
    lane 1 takes row 1's lane 2 (option ``(1, +1)``), lane 2 takes row 1's lane 3 (its ``(1, 2)`` slot
    went to lane 1, so option ``(1, +1)``), lane 3 finds nothing. The tree adds ``(2**24 + 1) + (1 + 0)``:
    ``2**24 + 1`` is a tie and rounds to even, ``2**24``, and so does ``2**24 + 1``: the result is
    ``2**24``. The dense PE takes a row per cycle, rows 0 and 1 into partials 0 and 1 of its accumulator:
    ``(2**24 + (1 + 1)) + (0 + 0) = 2**24 + 2`` exactly.
    """
    from trainforge.golden.dense_pe import dense_pe
    from trainforge.golden.tensordash.pe import td_pe

    one, big = 0x3F80, 0x4B80  # bfloat16 1.0 and 2**24
    b = np.array([[big, 0, 0, 0], [0, 0, one, one], [0, 0, 0, 0], [0, 0, 0, 0]])
    a = np.full((4, 4), one)
    clear = np.array([True, False, False, False])
    read = np.array([False, False, False, True])
    assert td_pe(a, b, clear, read, mac="bf16").tolist() == [0x4B800000]  # float32 2**24, not 2**24 + 2
    assert dense_pe(a, b, clear, read, mac="bf16").tolist() == [0x4B800001]  # 2**24 + 2


def _random_streams(generator, depth, rows, density, count=20, groups=30):
    total = depth * groups
    effectual = generator.random((count, rows, total, 4)) < density
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    cuts = np.sort(generator.choice(np.arange(1, total), 8, replace=False))
    read[cuts - 1], read[-1], clear[0], clear[cuts] = True, True, True, True
    return effectual, read, clear


def test_input_chain_keeps_the_window_full_at_full_rate(monkeypatch):
    """With an always-valid source, the modelled input chain (three group registers taking a
    group when one is free at the start of a cycle, the window) gives exactly the cycles of a window that is
    always full (the packed model has no chain); with two group registers the same rule would not."""
    from trainforge.golden.tensordash import core
    from trainforge.spec.tensordash import default_pattern

    def slower_streams():
        generator = np.random.default_rng(1)
        slower = 0
        for depth in (2, 3, 4, 5):
            for rows in (1, 4):
                for density in (0.0, 0.1, 0.3, 0.6, 1.0):
                    effectual, read, clear = _random_streams(generator, depth, rows, density)
                    pattern = default_pattern(4, depth)
                    chained = core.run_cores(effectual, read, clear, pattern, depth, record=True)
                    slower += int((chained.cycles != core._run_packed(effectual, read, clear, pattern,
                                                                       depth).cycles).sum())
        return slower

    assert slower_streams() == 0
    monkeypatch.setattr(core, "GROUP_REGISTERS", 2)
    assert slower_streams() > 0


@pytest.mark.parametrize("rows,depth", [(1, 4), (4, 4), (1, 2), (2, 5)])
def test_a_source_with_gaps_multiplies_every_pair_once_and_is_never_faster(rows, depth, seed):
    """With gaps on ``i_group`` (``offered``) each effectual pair is still multiplied exactly once, the
    stream takes at least its full-rate cycles (more where the gaps leave the window short), its last
    ``read`` row drains no earlier, and an always-true ``offered`` is the full-rate model."""
    generator = np.random.default_rng(seed)
    effectual, read, clear = _random_streams(generator, depth, rows, 0.4, count=6)
    pattern = default_pattern(4, depth)
    full = run_cores(effectual, read, clear, pattern, depth, record=True)
    same = run_cores(effectual, read, clear, pattern, depth, record=True, offered=np.ones(9, bool))
    assert np.array_equal(same.cycles, full.cycles) and np.array_equal(same.read_cycles, full.read_cycles)
    offered = np.concatenate([[True], generator.random(2000) < 0.3])
    gaps = run_cores(effectual, read, clear, pattern, depth, record=True, offered=offered)
    assert np.array_equal(gaps.multiplicity, effectual.astype(np.int64)), f"seed {seed}: multiplicity != effectual"
    # Never faster; slower where the gaps leave the window short, which a 30 % offer rate does to some stream (a
    # stream whose groups all arrive before its window needs them keeps its full-rate cycles: with rows 2 and
    # depth 5, 1 seed in 300 has such a stream; 0 of 1200 seeds over the four shapes has none slower).
    assert (gaps.cycles >= full.cycles).all(), f"seed {seed}: {gaps.cycles} against full rate {full.cycles}"
    assert (gaps.cycles > full.cycles).any(), f"seed {seed}: {gaps.cycles} against full rate {full.cycles}"
    # The last read row of each stream drains no earlier. An earlier row may: with fewer rows in the window the
    # greedy schedule takes a head row's pairs sooner (base seed 1740687652, rows 2, depth 5: stream 3's read rows
    # 3-5 drain at cycles 10, 17, 35 with gaps, 11, 18, 36 at full rate; the stream itself ends at 77, not 72).
    assert (gaps.read_cycles[:, -1] >= full.read_cycles[:, -1]).all()
    # A cycle whose window is empty schedules nothing.
    assert not gaps.active[~gaps.scheduled].any()


def test_a_source_gap_changes_which_products_share_a_cycle_worked_by_hand():
    """bfloat16, depth 2 (pattern ``(0,0),(1,0),(1,+1),(1,-1)``), A all ones, one partial. B rows:
    ``[1, 2**24, 1, 0]``, ``[0, 1, 0, 0]`` (group 0), ``[0, 1, 0, 0]``, ``[0, 0, 0, 0]`` (group 1);
    one dot product, read at row 3.

    - Full rate (groups taken at cycles 0 and 1): first scheduling cycle, rows 0-1 in the window: lanes
      0-2 take row 0's pairs, the tree gives ``(1 + 2**24) + (1 + 0)``: two ties to even, ``2**24``.
      Second cycle, rows 1-2: lane 1 takes row 1's ``1``, lane 0 row 2's ``1`` (option ``(1, +1)``):
      ``(1 + 1) + (0 + 0) = 2``, and the accumulator's ``2**24 + 2`` is exact: ``0x4B800001``.
    - Source valid in cycle 0, then not until cycle 4: the second cycle holds row 1 alone (row 2 has not
      arrived), so its sum is ``1`` and ``2**24 + 1`` ties to even, ``2**24``; the window is then empty
      (no row of the accumulator) until group 1 arrives, and row 2's ``1`` is lost the same way:
      ``0x4B800000``.
    """
    one, big = 0x3F80, 0x4B80
    b = np.array([[one, big, one, 0], [0, one, 0, 0], [0, one, 0, 0], [0, 0, 0, 0]])
    a = np.full((4, 4), one)
    clear = np.array([True, False, False, False])
    read = np.array([False, False, False, True])
    params = dict(mac="bf16", partial_sums=1, depth=2)
    assert td_pe(a, b, clear, read, **params).tolist() == [0x4B800001]
    offered = [True, False, False, False, True]
    assert td_pe(a, b, clear, read, offered=offered, **params).tolist() == [0x4B800000]
    run = td_pe_cycles(a, b, clear, read, record=True, offered=offered, **params)
    assert run.scheduled[:, 0].tolist() == [True, True, False, False, True]


def test_offered_must_start_with_the_first_transfer():
    effectual = np.ones((1, 1, 8, 4), bool)
    flags = np.zeros(8, bool)
    with pytest.raises(ParameterError, match="offered"):
        run_cores(effectual, flags, flags, default_pattern(4, 4), 4, record=True, offered=[False, True])


def test_sink_stalls_stop_the_pipeline_worked_by_hand():
    """The default integer PE (result 6 cycles after its scheduling cycle, the first scheduling cycle 2
    cycles after the first transfer), 8 dense one-row dot products, an always-valid source; the sink not
    ready until cycle 12. At full rate the results leave at cycles 8-15. Stalled: result 0 enters the
    output stage at 7, result 1 its skid register at 8; result 2, at the pipeline's end from cycle 9,
    stops everything (the clock enable) until the stage takes it at 13. The stage delivers 0 and 1 at
    12 and 13, and then every cycle: 12-19."""
    ones = np.ones((8, 4), dtype=np.int64)
    flags = np.ones(8, bool)
    full = td_pe_cycles(ones, ones, flags, flags, record=True, ready=np.ones(4, bool))
    assert full.result_clocks.tolist() == list(range(8, 16))
    stalled = td_pe_cycles(ones, ones, flags, flags, record=True, ready=[False] * 12)
    assert stalled.result_clocks.tolist() == list(range(12, 20))
    assert stalled.read_cycles.tolist() == full.read_cycles.tolist()  # the schedule is only delayed


def test_a_ready_pattern_needs_one_core_and_the_latency():
    effectual = np.ones((2, 1, 8, 4), bool)
    flags = np.ones(8, bool)
    with pytest.raises(ParameterError, match="ready"):
        run_cores(effectual, flags, flags, default_pattern(4, 4), 4, record=True, ready=[True], latency=6)
