"""What the MAC array's generator and golden model share: parameters, rounding variants, random generator reset.

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``frac_bits``, ``frac_bits16``, ``rounding``, ``seed``.
"""
import numpy as np
from amaranth import unsigned
from amaranth.lib import data

from ...errors import ParameterError
from ..params import Param, ParamSchema

__all__ = ["ROUNDINGS", "WARMUP_STEPS", "LATENCY", "PARAMS", "check_seed", "lfsr_step", "reset_state", "xorshift_seeds",
           "row_layout", "result_layout"]

#: The rounding variants of the MAC block (Table 1).
ROUNDINGS = ("sr_lo", "sr_full", "truncate", "nearest")

#: Cycles from the acceptance of a ``read`` row to its result on ``o_y``, without stalls: the
#: registered operands (per lane), the registered partial products, their two registered sums, the
#: registered rounded product, the accumulator's saturating add (into the output stream stage).
LATENCY = 5

#: Steps the LFSR runs at elaboration so that the shift register holds 32 LFSR bits at reset.
WARMUP_STEPS = 32

_MASK32 = (1 << 32) - 1


def check_seed(values):
    """Schema constraint: under SR-LO the seed is an 8-bit LFSR state."""
    if values["rounding"] == "sr_lo" and values["seed"] > 255:
        raise ParameterError(f"parameter 'seed' = {values['seed']!r} is invalid (the SR-LO LFSR has 8 stages); "
                             "allowed: an integer in 1..255 when rounding is sr_lo")


#: The parameters of ``nt_mac``.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "MAC lanes k", minimum=1, maximum=64),
    Param("frac_bits", int, 16, "fraction bits of the 32-bit fixed-point format", minimum=0, maximum=30),
    Param("frac_bits16", int, 8, "fraction bits of the 16-bit fixed-point format", minimum=0, maximum=14),
    Param("rounding", str, "sr_lo", "32-bit rounding: SR-LO, per-MAC full-width SR, truncate or nearest",
          choices=ROUNDINGS),
    Param("seed", int, 0xA5, "random generator seed (LFSR state for sr_lo: 1..255)",
          minimum=1, maximum=(1 << 32) - 1),
), constraints=(check_seed,))


def lfsr_step(state):
    """One step of the 8-stage LFSR: returns ``(new_state, output_bit)``; the output is the feedback bit."""
    bit = ((state >> 7) ^ (state >> 5) ^ (state >> 4) ^ (state >> 3)) & 1
    return ((state << 1) | bit) & 0xFF, bit


def reset_state(seed):
    """Reset values ``(lfsr_state, shift_register)`` of SR-LO: the seed run :data:`WARMUP_STEPS` steps."""
    state, register = seed, 0
    for _ in range(WARMUP_STEPS):
        state, bit = lfsr_step(state)
        register = ((register << 1) | bit) & _MASK32
    return state, register


def xorshift_seeds(seed, lanes):
    """Per-lane non-zero 32-bit seeds of the full-width generators, derived from the block's ``seed``."""
    lane = np.arange(lanes, dtype=np.uint64)
    mixed = (np.uint64(seed) * np.uint64(0x9E3779B1) + (lane + np.uint64(1)) * np.uint64(0x85EBCA77)) \
        & np.uint64(_MASK32)
    return np.where(mixed == 0, np.uint64(1), mixed)


def row_layout(params, lane_operands=False):
    """Payload of ``i_row``: ``a`` (32 bits), ``x`` (``lanes`` 32-bit words), ``wide``, ``sr``, ``clear``, ``read``;
    with ``lane_operands``, ``a_lanes`` (``lanes`` 32-bit words: lane ``i`` multiplies ``a_lanes[i]``; the PE,
    whose product pass needs a lane's own operand) instead of ``a``."""
    operand = {"a_lanes": data.ArrayLayout(unsigned(32), params["lanes"])} if lane_operands else {"a": unsigned(32)}
    return data.StructLayout({
        **operand,
        "x": data.ArrayLayout(unsigned(32), params["lanes"]),
        "wide": 1,
        "sr": 1,
        "clear": 1,
        "read": 1,
    })


def result_layout(params):
    """Payload of ``o_y``: ``lanes`` 32-bit accumulator words."""
    return data.ArrayLayout(unsigned(32), params["lanes"])
