"""TensorDash hierarchical priority-encoder scheduler (paper, Section III-A, Fig. 6)."""
from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...golden.tensordash.pattern import lane_levels, option_slots, select_bits
from .params import PATTERN_PARAMS, pattern_of

__all__ = ["TDScheduler", "TDSchedulerStream", "schedule_logic"]


class TDScheduler(wiring.Component):
    """Combinational single-cycle scheduler: per-lane selects ``MS`` and the advance ``AS``.

    Lanes decide in the levels of :func:`~trainforge.golden.tensordash.pattern.lane_levels`;
    lanes of one level have disjoint slots and decide in parallel with one
    priority encoder each; every level clears its choices from ``Z`` before the
    next level sees it. The exact rule is that of
    :func:`trainforge.golden.tensordash.scheduler.schedule`.

    Parameters
    ----------
    lanes, depth : int
        Candidate vector shape: ``depth`` rows of ``lanes`` bits.
    pattern : sequence of (int, int)
        A validated connectivity pattern.

    Members
    -------
    candidates : In(ArrayLayout(unsigned(lanes), depth))
        ``Z``: effectual pairs not yet multiplied, bit ``l`` of row ``d``.
    visible : In(depth)
        Rows the scheduler may use.
    ms : Out(ArrayLayout(unsigned(select_bits), lanes))
        Option index per lane (0 when idle).
    active : Out(lanes)
        Lanes that multiply a pair.
    chosen : Out(ArrayLayout(unsigned(lanes), depth))
        Slots taken this cycle.
    advance : Out(range(depth + 1))
        ``AS``: leading visible rows left without candidates.

    Attributes
    ----------
    levels : list of tuple of int
        The lanes deciding at each level.
    """

    def __init__(self, *, lanes, depth, pattern):
        self.lanes = lanes
        self.depth = depth
        self.pattern = tuple(pattern)
        self.levels = lane_levels(self.pattern, lanes)
        self.select_bits = select_bits(self.pattern)
        super().__init__({
            "candidates": In(data.ArrayLayout(lanes, depth)),
            "visible": In(depth),
            "ms": Out(data.ArrayLayout(self.select_bits, lanes)),
            "active": Out(lanes),
            "chosen": Out(data.ArrayLayout(lanes, depth)),
            "advance": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        ms, active, chosen, advance = schedule_logic(m, self.candidates, self.visible, self.pattern,
                                                     self.lanes, self.depth, "")
        m.d.comb += [self.ms.eq(ms), self.active.eq(active), self.advance.eq(advance)]
        for row in range(self.depth):
            m.d.comb += self.chosen[row].eq(chosen[row])
        return m


def schedule_logic(m, candidates, visible, pattern, lanes, depth, prefix):
    """Add the scheduler's gates to module ``m`` (flat, no submodule) and return its outputs.

    Parameters
    ----------
    m : Module
    candidates : sequence of Value
        ``depth`` values of ``lanes`` bits: ``Z``.
    visible : Value
        ``depth`` bits.
    pattern : tuple of (int, int)
    lanes, depth : int
    prefix : str
        Prefix of the signal names (one scheduler per PE row in a tile).

    Returns
    -------
    ms : list of Signal
        Per-lane option index.
    active : Signal(lanes)
    chosen : list of Signal(lanes)
        Per row.
    advance : Signal(range(depth + 1))
    """
    bits = select_bits(pattern)
    ms = [Signal(bits, name=f"{prefix}ms{lane}") for lane in range(lanes)]
    active = Signal(lanes, name=f"{prefix}active")
    level_input = [candidates[row] & visible[row].replicate(lanes) for row in range(depth)]
    taken_all = [0] * depth
    for number, level in enumerate(lane_levels(pattern, lanes)):
        level_taken = [0] * depth
        for lane in level:
            found = 0
            choice = 0
            for index, (row, column) in enumerate(option_slots(pattern, lanes, lane)):
                take = Signal(name=f"{prefix}level{number}_lane{lane}_option{index}")
                m.d.comb += take.eq(level_input[row][column] & ~found)
                choice = choice | (take.replicate(bits) & index)
                level_taken[row] = level_taken[row] | (take << column)
                found = found | take
            m.d.comb += [ms[lane].eq(choice), active[lane].eq(found)]
        next_input = []
        for row in range(depth):
            taken = Signal(lanes, name=f"{prefix}level{number}_taken{row}")
            remaining = Signal(lanes, name=f"{prefix}level{number}_remaining{row}")
            m.d.comb += [taken.eq(level_taken[row]), remaining.eq(level_input[row] & ~taken)]
            next_input.append(remaining)
            taken_all[row] = taken_all[row] | level_taken[row]
        level_input = next_input
    chosen = []
    drained_prefix = 1
    advance_sum = 0
    for row in range(depth):
        row_chosen = Signal(lanes, name=f"{prefix}chosen{row}")
        m.d.comb += row_chosen.eq(taken_all[row])
        chosen.append(row_chosen)
        drained_prefix = drained_prefix & visible[row] & (level_input[row] == 0)
        advance_sum = advance_sum + drained_prefix
    advance = Signal(range(depth + 1), name=f"{prefix}advance")
    m.d.comb += advance.eq(advance_sum)
    return ms, active, chosen, advance


class TDSchedulerStream(wiring.Component):
    """The scheduler behind a registered stream: one candidate vector in, its schedule out a cycle later.

    Parameters
    ----------
    lanes : int
        Lanes L.
    depth : int
        Staging buffer depth D.
    pattern : str
        ``"default"`` or ``"step:offset,..."`` (see :mod:`trainforge.golden.tensordash.pattern`).

    Members
    -------
    i_candidates : In(stream.Signature(candidate_layout))
        ``candidates`` (D x L bits) and ``visible`` (D bits).
    o_schedule : Out(stream.Signature(schedule_layout))
        ``ms``, ``active``, ``chosen`` and ``advance`` of that vector.

    Attributes
    ----------
    candidate_layout, schedule_layout : data.StructLayout
    levels : list of tuple of int
    """

    PARAMS = PATTERN_PARAMS

    def __init__(self, *, lanes=4, depth=4, pattern="default"):
        self.params = self.PARAMS.resolve(lanes=lanes, depth=depth, pattern=pattern)
        self.lanes = lanes
        self.depth = depth
        self.pattern = pattern_of(self.params)
        self.levels = lane_levels(self.pattern, lanes)
        self.candidate_layout = data.StructLayout({
            "candidates": data.ArrayLayout(lanes, depth),
            "visible": depth,
        })
        self.schedule_layout = data.StructLayout({
            "ms": data.ArrayLayout(select_bits(self.pattern), lanes),
            "active": lanes,
            "chosen": data.ArrayLayout(lanes, depth),
            "advance": range(depth + 1),
        })
        super().__init__({
            "i_candidates": In(stream.Signature(self.candidate_layout)),
            "o_schedule": Out(stream.Signature(self.schedule_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        ms, active, chosen, advance = schedule_logic(
            m, self.i_candidates.payload.candidates, self.i_candidates.payload.visible, self.pattern,
            self.lanes, self.depth, "")
        m.d.comb += self.i_candidates.ready.eq(~self.o_schedule.valid | self.o_schedule.ready)
        with m.If(self.o_schedule.ready):
            m.d.sync += self.o_schedule.valid.eq(0)
        with m.If(self.i_candidates.valid & self.i_candidates.ready):
            m.d.sync += [
                self.o_schedule.valid.eq(1),
                self.o_schedule.payload.ms.eq(Cat(*ms)),
                self.o_schedule.payload.active.eq(active),
                self.o_schedule.payload.chosen.eq(Cat(*chosen)),
                self.o_schedule.payload.advance.eq(advance),
            ]
        return m
