"""Scenario table of ``nt_mac``: mixed 32/16-bit rows with every rounding rule, saturation corners, backpressure.

Reference (independent of the golden model): Python integer arithmetic of the MAC rule
(``hw/neurotrainer/docs/mac.md``, Fig. 11, Table 1), one row at a time:

- 32-bit row, per lane: ``y = sat32((a * x + (y << F) + r) >> F)`` with ``>>`` the floor
  shift; ``r`` = 0 (truncate, or ``frac_bits`` = 0), ``1 << (F - 1)`` (nearest), or the row's
  random word masked to ``F`` bits when the row's ``sr`` flag is set (SR variants);
- 16-bit row, per lane and half: ``y_h = sat16((a_h * x_h + (y_h << F16)) >> F16)``;
- random words: SR-LO's 8-stage Fibonacci LFSR (taps 8, 6, 5, 4: feedback = bits 7, 5, 4, 3
  of the state, shifted in at the bottom) feeding a shared 32-bit left-shift register, both
  run 32 steps from the seed at reset; full-width SR: per lane a xorshift32 (13, 17, 5)
  seeded ``seed * 0x9E3779B1 + (lane + 1) * 0x85EBCA77 (mod 2**32)`` (1 if that is 0). Each
  row uses the words before the generators step, and they step once per row.

Every scenario starts from reset. At full rate a ``read`` row's result leaves
``LATENCY`` (:data:`trainforge.spec.neurotrainer.mac.LATENCY`) cycles after the row.
"""
import numpy as np

from trainforge.golden.neurotrainer.mac import nt_mac
from trainforge.spec.neurotrainer.mac import LATENCY

from scenario import Scenario, Transactions, random_pattern, rng_for

_MASK32 = (1 << 32) - 1
_LATENCY = LATENCY


def _signed(word, bits):
    word &= (1 << bits) - 1
    return word - (1 << bits) if word >> (bits - 1) else word


def _saturate(value, bits):
    return min(max(value, -(1 << (bits - 1))), (1 << (bits - 1)) - 1)


class _Generators:
    def __init__(self, params):
        self.rounding, self.lanes = params["rounding"], params["lanes"]
        self.lfsr, self.register = params["seed"] & 0xFF, 0
        for _ in range(32):
            self._step_lfsr()
        self.states = []
        for lane in range(self.lanes):
            state = (params["seed"] * 0x9E3779B1 + (lane + 1) * 0x85EBCA77) & _MASK32
            self.states.append(state or 1)

    def _step_lfsr(self):
        bit = ((self.lfsr >> 7) ^ (self.lfsr >> 5) ^ (self.lfsr >> 4) ^ (self.lfsr >> 3)) & 1
        self.lfsr = ((self.lfsr << 1) | bit) & 0xFF
        self.register = ((self.register << 1) | bit) & _MASK32

    def words(self):
        return [self.register] * self.lanes if self.rounding == "sr_lo" else list(self.states)

    def step(self):
        self._step_lfsr()
        for lane, state in enumerate(self.states):
            state ^= (state << 13) & _MASK32
            state ^= state >> 17
            self.states[lane] = state ^ ((state << 5) & _MASK32)


def _offset(params, word, sr):
    """The rounding offset a 32-bit row adds before the shift by ``F``: 0 (truncate, or ``F`` = 0), ``1 << (F - 1)``
    (nearest), the lane's random word masked to ``F`` bits for a row with ``sr`` set (SR variants)."""
    frac, rounding = params["frac_bits"], params["rounding"]
    if rounding == "truncate" or frac == 0:
        return 0
    if rounding == "nearest":
        return 1 << (frac - 1)
    return word & ((1 << frac) - 1) if sr else 0


def reference(params, rows):
    """The ``o_y`` items for the ``i_row`` items ``rows``, starting from reset (a row with ``a_lanes`` gives
    lane ``i`` the operand ``a_lanes[i]`` instead of ``a``: the PE's product pass)."""
    frac, frac16 = params["frac_bits"], params["frac_bits16"]
    generators = _Generators(params)
    y = [0] * params["lanes"]
    results = []
    for row in rows:
        words = generators.words()
        generators.step()
        if row["clear"]:
            y = [0] * params["lanes"]
        for lane, x in enumerate(row["x"]):
            a = row["a_lanes"][lane] if "a_lanes" in row else row["a"]
            if row["wide"]:
                offset = _offset(params, words[lane], row["sr"])
                total = _signed(a, 32) * _signed(x, 32) + (_signed(y[lane], 32) << frac) + offset
                y[lane] = _saturate(total >> frac, 32) & _MASK32
            else:
                halves = []
                for half in (0, 16):
                    total = _signed(a >> half, 16) * _signed(x >> half, 16) \
                        + (_signed(y[lane] >> half, 16) << frac16)
                    halves.append((_saturate(total >> frac16, 16) & 0xFFFF) << half)
                y[lane] = halves[0] | halves[1]
        if row["read"]:
            results.append(list(y))
    return results


def _random_rows(rng, lanes, count):
    rows = []
    for number in range(count):
        scale = 1 << 32 if rng.random() < 0.25 else 1 << 20
        rows.append({"a": rng.randrange(-scale, scale) & _MASK32,
                     "x": [rng.randrange(-scale, scale) & _MASK32 for _ in range(lanes)],
                     "wide": int(rng.random() < 0.7), "sr": int(rng.random() < 0.8),
                     "clear": int(number == 0 or rng.random() < 0.1),
                     "read": int(number == count - 1 or rng.random() < 0.3)})
    return rows


#: The product bit whose value decides the rounding carry in :func:`carry_rows`.
CARRY_BIT = 5


def carry_rows(params, count):
    """32-bit SR rows, each cleared and read, whose result is decided by bit :data:`CARRY_BIT` of one lane's low
    partial product: row ``k`` multiplies ``a`` by 1 in lane ``k mod lanes`` (0 in the others), with ``a`` the
    smallest value at or above ``2**F - offset`` (the row's rounding offset in that lane, from the reference's
    generators) that has that bit set, so ``a + offset`` carries into bit ``F`` by less than ``2**CARRY_BIT``:
    the result is 1, and 0 if that product bit were lost (a partial-product register not holding its value while
    the pipeline waits). None when ``F`` leaves no room below it (``F <= CARRY_BIT + 1``)."""
    frac, lanes = params["frac_bits"], params["lanes"]
    if frac <= CARRY_BIT + 1:
        return None
    generators = _Generators(params)
    rows = []
    for number in range(count):
        words = generators.words()
        generators.step()
        lane = number % lanes
        low = (1 << frac) - _offset(params, words[lane], 1)
        a = next(value for value in range(low, low + (2 << CARRY_BIT)) if value >> CARRY_BIT & 1)
        rows.append({"a": a, "x": [int(other == lane) for other in range(lanes)], "wide": 1, "sr": 1, "clear": 1,
                     "read": 1})
    return rows


def _constant_rows(lanes, count, a, x, wide):
    return [{"a": a, "x": [x] * lanes, "wide": int(wide), "sr": 1, "clear": int(number == 0), "read": 1}
            for number in range(count)]


#: Hand-picked operand words (a, x, 32-bit mode) that reach the corners of the arithmetic.
CORNERS = (
    ("all zeros", 0, 0, True),
    ("32-bit positive saturation", 0x7FFFFFFF, 0x7FFFFFFF, True),
    ("32-bit negative saturation", 0x80000000, 0x7FFFFFFF, True),
    ("32-bit largest product", 0x80000000, 0x80000000, True),
    ("16-bit positive saturation", 0x7FFF7FFF, 0x7FFF7FFF, False),
    ("16-bit negative saturation", 0x80007FFF, 0x7FFF8000, False),
    ("smallest negative steps (floor against rounding)", 0xFFFFFFFF, 0x00000001, True),
)


def scenarios(params, seed):
    lanes = params["lanes"]
    table = []
    rng = rng_for(seed, "nt_mac", "full rate")
    rows = _random_rows(rng, lanes, 120)
    table.append(Scenario("random rows at full rate", {"i_row": rows}, {"o_y": reference(params, rows)},
                          timing={"o_y": [number + _LATENCY for number, row in enumerate(rows) if row["read"]]}))
    rows = _random_rows(rng, lanes, 40)
    rows[0]["clear"] = 0
    table.append(Scenario("accumulators are zero after reset", {"i_row": rows}, {"o_y": reference(params, rows)}))
    for name, a, x, wide in CORNERS:
        rows = _constant_rows(lanes, 12, a, x, wide)
        table.append(Scenario(name, {"i_row": rows}, {"o_y": reference(params, rows)}))
    for name, valid, ready in (("producer gaps, consumer stalls", 0.7, 0.5), ("full producer, slow consumer", 1.0, 0.2)):
        rng = rng_for(seed, "nt_mac", name)
        rows = _random_rows(rng, lanes, 150)
        table.append(Scenario(name, {"i_row": rows}, {"o_y": reference(params, rows)},
                              valid={"i_row": random_pattern(rng, valid)}, ready={"o_y": random_pattern(rng, ready)}))
    rows = carry_rows(params, 80)
    if rows is not None:
        rng = rng_for(seed, "nt_mac", "carry")
        table.append(Scenario("rounding carries hanging on one product bit, held through consumer stalls",
                              {"i_row": rows}, {"o_y": reference(params, rows)},
                              ready={"o_y": random_pattern(rng, 0.25)}))
    return table


def golden(params, scenario):
    rows = scenario.stimulus["i_row"]
    columns = {flag: [row[flag] for row in rows] for flag in ("wide", "sr", "clear", "read")}
    results = nt_mac([row["a"] for row in rows], np.array([row["x"] for row in rows], dtype=np.int64),
                     columns["wide"], columns["sr"], columns["clear"], columns["read"], **params)
    return Transactions({"o_y": [[int(word) for word in result] for result in results]})
