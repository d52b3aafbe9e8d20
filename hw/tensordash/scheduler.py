"""TensorDash hierarchical priority-encoder scheduler (paper, Section III-A, Fig. 6)."""
from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import tensordash as spec
from ...spec.tensordash import lane_levels, option_slots, select_bits
from ..stream_stage import StreamStage

__all__ = ["TDScheduler", "schedule_logic"]


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
    drained : list of Signal
        Thermometer code of ``advance``: ``drained[d]`` is ``advance > d``.
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
    drained = []
    drained_prefix = 1
    for row in range(depth):
        row_chosen = Signal(lanes, name=f"{prefix}chosen{row}")
        m.d.comb += row_chosen.eq(taken_all[row])
        chosen.append(row_chosen)
        row_drained = Signal(name=f"{prefix}drained{row}")
        m.d.comb += row_drained.eq(drained_prefix & visible[row] & (level_input[row] == 0))
        drained.append(row_drained)
        drained_prefix = row_drained
    advance = Signal(range(depth + 1), name=f"{prefix}advance")
    m.d.comb += advance.eq(sum(drained))
    return ms, active, chosen, advance, drained


class TDScheduler(wiring.Component):
    """The hierarchical scheduler behind a registered stream: one candidate vector in, its schedule out a cycle later.

    The schedule of the vector on ``i_candidates`` is computed combinationally
    and registered in a :class:`~trainforge.hw.stream_stage.StreamStage`
    (:data:`~trainforge.spec.tensordash.SCHEDULER_LATENCY` cycle, one vector
    per cycle, ``i_candidates.ready`` registered).

    Lanes decide in the levels of :func:`~trainforge.spec.tensordash.lane_levels`;
    lanes of one level have disjoint slots and decide in parallel with one
    priority encoder each; every level clears its choices from ``Z`` before the
    next level sees it (:func:`schedule_logic`). The exact rule is that of
    :func:`trainforge.golden.tensordash.scheduler.schedule`.

    Parameters
    ----------
    lanes : int
        Lanes L.
    depth : int
        Staging buffer depth D.
    pattern : str
        ``"default"`` or ``"step:offset,..."`` (see :mod:`trainforge.spec.tensordash`).

    The schema, defaults included, is :data:`trainforge.spec.tensordash.SCHEDULER_PARAMS`.

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

    PARAMS = spec.SCHEDULER_PARAMS

    def __init__(self, **params):
        params = self.PARAMS.apply(self, **params)
        self.pattern = spec.pattern_of(params)
        self.levels = lane_levels(self.pattern, self.lanes)
        self.candidate_layout = spec.candidate_layout(params)
        self.schedule_layout = spec.schedule_layout(params)
        super().__init__({
            "i_candidates": In(stream.Signature(self.candidate_layout)),
            "o_schedule": Out(stream.Signature(self.schedule_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        ms, active, chosen, advance, _ = schedule_logic(
            m, self.i_candidates.payload.candidates, self.i_candidates.payload.visible, self.pattern,
            self.lanes, self.depth, "")
        m.submodules.output_stage = stage = StreamStage(self.schedule_layout)
        m.d.comb += [
            stage.i_stream.valid.eq(self.i_candidates.valid),
            self.i_candidates.ready.eq(stage.i_stream.ready),
            stage.i_stream.payload.ms.eq(Cat(*ms)),
            stage.i_stream.payload.active.eq(active),
            stage.i_stream.payload.chosen.eq(Cat(*chosen)),
            stage.i_stream.payload.advance.eq(advance),
        ]
        wiring.connect(m, stage.o_stream, wiring.flipped(self.o_schedule))
        return m
