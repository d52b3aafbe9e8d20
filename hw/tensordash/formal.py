"""Formal wrapper of the TensorDash scheduler (:func:`~trainforge.hw.tensordash.scheduler.schedule_logic`)."""
from functools import reduce
from operator import and_, or_

from amaranth import Const, Elaboratable, Module, Signal, Value
from amaranth.hdl import Assert, Cover

from ...errors import ParameterError
from ...spec import tensordash as spec
from ...spec.tensordash import lane_levels, option_slots
from .scheduler import schedule_logic

__all__ = ["PROPERTIES", "SchedulerProperties"]

#: The groups of properties, each asserted unless left out (a test breaks one at a time):
#: ``selects`` (an idle lane's select is 0, selects within the pattern, ``chosen`` = the slots taken),
#: ``no_slot_twice``, ``candidates_only``, ``idle_lanes``, ``priority`` and ``advance``.
PROPERTIES = ("selects", "no_slot_twice", "candidates_only", "idle_lanes", "priority", "advance")


def _bit(value):
    """``value`` as one bit; refuses a wider value (``~`` of a wider value is true when the value is 1)."""
    value = Value.cast(value)
    if len(value) != 1 or value.shape().signed:
        raise TypeError(f"a property term must be one unsigned bit, not {value.shape()}: {value!r}")
    return value


def _any(values):
    """One bit: any of ``values`` (one bit each); 0 for none."""
    return reduce(or_, (_bit(value) for value in values), Const(0, 1))


def _all(values):
    """One bit: all of ``values`` (one bit each); 1 for none."""
    return reduce(and_, (_bit(value) for value in values), Const(1, 1))


class SchedulerProperties(Elaboratable):
    """The scheduler's gates on a free candidate vector, with its properties asserted.

    The scheduler is combinational, so one step covers every candidate vector
    ``Z`` and every ``visible`` mask: the proof is complete. The properties are
    stated from the pattern alone (:func:`~trainforge.spec.tensordash.option_slots`,
    :func:`~trainforge.spec.tensordash.lane_levels`), not from the scheduler's code.
    With ``take[lane][k]`` = the lane is active and its select is ``k``:

    - no slot is taken by two (lane, option) pairs, and ``chosen`` marks exactly the slots taken;
    - every slot taken is a candidate of a visible row;
    - an idle lane's select is 0 and no option of it was free at its level (a candidate of a visible
      row not taken by a lane of an earlier level);
    - an active lane took a free option and no free option before it in the pattern's priority order;
    - ``AS`` (``advance``) is the number of leading visible rows with no candidate left untaken, and
      ``drained`` its thermometer code; a visible head row is always drained.

    Parameters
    ----------
    lanes, depth : int
    pattern : str or sequence of (int, int)
        As the ``td_scheduler`` parameter (:data:`~trainforge.spec.tensordash.SCHEDULER_PARAMS`).
    logic : callable, optional
        The scheduler under proof, with the signature of
        :func:`~trainforge.hw.tensordash.scheduler.schedule_logic` (the default); a deliberately broken
        one shows that the proof can fail.
    properties : sequence of str
        The groups of :data:`PROPERTIES` to assert (all by default).

    Attributes
    ----------
    candidates : Signal(depth * lanes)
        Row ``r`` is bits ``r * lanes`` to ``r * lanes + lanes - 1``.
    visible : Signal(depth)
    ports : list of Signal
    """

    def __init__(self, lanes=4, depth=4, pattern="default", logic=schedule_logic, properties=PROPERTIES):
        params = spec.SCHEDULER_PARAMS.resolve(lanes=lanes, depth=depth, pattern=pattern)
        unknown = set(properties) - set(PROPERTIES)
        if unknown:
            raise ParameterError(f"unknown scheduler properties {sorted(unknown)}; known: {', '.join(PROPERTIES)}")
        self.lanes, self.depth = lanes, depth
        self.pattern = spec.pattern_of(params)
        self.logic = logic
        self.properties = tuple(properties)
        self.candidates = Signal(depth * lanes)
        self.visible = Signal(depth)
        self.ports = [self.candidates, self.visible]

    def elaborate(self, platform):
        m = Module()
        lanes, depth, pattern = self.lanes, self.depth, self.pattern
        rows = [self.candidates[row * lanes:(row + 1) * lanes] for row in range(depth)]
        ms, active, chosen, advance, drained = self.logic(m, rows, self.visible, pattern, lanes, depth, "dut_")

        def check(group, condition, message):
            # src_loc_at=1: a failure names the line that called check(), not this one.
            if group in self.properties:
                m.d.comb += Assert(_bit(condition), message, src_loc_at=1)

        def candidate(slot):
            row, column = slot
            return _bit(rows[row][column] & self.visible[row])

        options = [option_slots(pattern, lanes, lane) for lane in range(lanes)]
        take = [[Signal(name=f"take_lane{lane}_option{index}") for index in range(len(pattern))]
                for lane in range(lanes)]
        takers = {}
        for lane in range(lanes):
            for index, slot in enumerate(options[lane]):
                m.d.comb += take[lane][index].eq(active[lane] & (ms[lane] == index))
                takers.setdefault(slot, []).append(take[lane][index])

        for lane in range(lanes):
            check("selects", active[lane] | (ms[lane] == 0), "an idle lane's select is not 0")
            if 2 ** len(ms[lane]) > len(pattern):
                check("selects", ms[lane] < len(pattern), "a select is past the pattern's options")
        for (row, column), users in takers.items():
            for first in range(len(users)):
                for second in range(first + 1, len(users)):
                    check("no_slot_twice", ~(users[first] & users[second]), "a slot is chosen twice")
            check("selects", chosen[row][column] == _any(users), "chosen is not the set of slots taken")
        for lane in range(lanes):
            for index, slot in enumerate(options[lane]):
                check("candidates_only", ~take[lane][index] | candidate(slot), "a chosen slot is no visible candidate")

        taken_before = {}
        for level in lane_levels(pattern, lanes):
            for lane in level:
                free = [candidate(slot) & ~taken_before.get(slot, Const(0, 1)) for slot in options[lane]]
                check("idle_lanes", active[lane] | ~_any(free), "an idle lane had an option free at its level")
                for index in range(len(pattern)):
                    taken = take[lane][index]
                    check("priority", ~taken | free[index], "a lane took an option an earlier level took")
                    check("priority", ~taken | ~_any(free[:index]), "a lane skipped a free option of higher priority")
            for lane in level:
                for index, slot in enumerate(options[lane]):
                    taken_before[slot] = taken_before.get(slot, Const(0, 1)) | take[lane][index]

        leading = []
        for row in range(depth):
            left = _any(candidate((row, column)) & ~_any(takers.get((row, column), [])) for column in range(lanes))
            leading.append(_bit(self.visible[row] & ~left))
            check("advance", (advance > row) == _all(leading), "AS is not the number of leading drained rows")
            check("advance", drained[row] == (advance > row), "drained is not the thermometer code of AS")
        check("advance", advance <= depth, "AS is past the depth")
        check("advance", ~self.visible[0] | (advance >= 1), "a visible head row was not drained")
        m.d.comb += Cover(advance == depth)
        return m
