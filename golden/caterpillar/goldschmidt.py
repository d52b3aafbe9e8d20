"""Goldschmidt reciprocal on the PE's MAC with a small lookup table (softmax's ``1 / sum``).

Fixed point, vectorised, bit-exact to the integer recipe below (truncating
shifts, as a MAC followed by a right shift computes them):

1. Normalise: ``d = D * 2**-shift`` lies in ``[1/2, 1)`` (``frac`` fraction bits).
2. Look up ``x0 ~ 1/d`` from a table indexed by the ``table_bits`` bits of
   ``d`` after its leading one (the table holds ``1/midpoint`` of each interval).
3. Goldschmidt: ``N = x0``, ``Q = d * x0``; each iteration ``F = 2 - Q``,
   ``N = N * F``, ``Q = Q * F``; two MACs per iteration. ``Q -> 1`` and
   ``N -> 1/d`` quadratically: the error after ``k`` iterations is about
   ``err0 ** (2 ** k)`` with ``err0 <= 2 ** -(table_bits + 1)``.
4. Denormalise: ``1/D = N * 2**-shift``.

On the half-precision FPU (``mac="fp16"``, :func:`reciprocal_unit_fp16`) the same recipe runs on FP
bit patterns: FP32 values in and out, FP16 operands of the multiplier (every MAC result rounded to FP16 to
feed the next MAC), the factor ``F = 2 - Q`` made by the FPU's FP32 adder.
"""
import numpy as np

from ...errors import ParameterError, ProgramError
from ...spec.caterpillar import (RECIPROCAL_PARAMS, params_with_defaults, reciprocal_table, reciprocal_table_fp16,
                                 result_width, unit_interval, unit_latency)
from ...spec.fp import FP16, FP32
from ..fp import fp16_to_fp32, fp32_add, fp32_to_fp16, fp_mul_exact

__all__ = ["reciprocal_table", "goldschmidt_reciprocal", "result_width", "unit_latency", "unit_interval",
           "reciprocal_unit", "reciprocal_unit_fp16", "result_cycles"]


def goldschmidt_reciprocal(values, **params):
    """Fixed-point reciprocals of positive fixed-point values.

    Parameters
    ----------
    values : array_like of int
        Positive numbers with ``frac`` fraction bits (``value / 2**frac``).
    **params
        ``frac`` (fraction bits of inputs, intermediate values and results, at most 28),
        ``table_bits`` (lookup-table index bits), ``iterations`` (Goldschmidt iterations, two MACs
        each); missing ones take the ``cp_reciprocal`` schema defaults, others are ignored.

    Returns
    -------
    numpy.ndarray of int64
        ``round-down(2**frac / (value / 2**frac))``-like results with ``frac`` fraction bits.
    """
    values = np.asarray(values, dtype=np.int64)
    resolved = params_with_defaults(RECIPROCAL_PARAMS, params)
    frac, table_bits, iterations = resolved["frac"], resolved["table_bits"], resolved["iterations"]
    if np.any(values <= 0):
        raise ProgramError("goldschmidt_reciprocal needs positive values")
    if not 1 <= frac <= 28:
        raise ParameterError(f"parameter 'frac' = {frac} is out of range; allowed: 1..28")
    # Normalise to d in [2**(frac-1), 2**frac): shift = bit_length(value) - frac.
    bit_length = np.floor(np.log2(values)).astype(np.int64) + 1
    shift = bit_length - frac
    d = np.where(shift >= 0, values >> np.maximum(shift, 0), values << np.maximum(-shift, 0))
    index = (d >> (frac - 1 - table_bits)) & ((1 << table_bits) - 1)
    n = reciprocal_table(table_bits, frac)[index]
    q = (d * n) >> frac
    two = np.int64(2 << frac)
    for _ in range(iterations):
        f = two - q
        n = (n * f) >> frac
        q = (q * f) >> frac
    # 1/value = (1/d) * 2**-shift, in frac fraction bits.
    return np.where(shift >= 0, n >> np.maximum(shift, 0), n << np.maximum(-shift, 0))


def reciprocal_unit(values, **params):
    """What ``cp_reciprocal`` outputs: :func:`goldschmidt_reciprocal`, and all ones for a zero value.

    Parameters
    ----------
    values : array_like of int
        Non-negative values with ``frac`` fraction bits.
    **params
        ``cp_reciprocal`` parameters (:func:`goldschmidt_reciprocal`).

    Returns
    -------
    numpy.ndarray of int64
    """
    resolved = params_with_defaults(RECIPROCAL_PARAMS, params)
    if resolved["mac"] == "fp16":
        return reciprocal_unit_fp16(values, **params)
    values = np.asarray(values, dtype=np.int64)
    saturated = (1 << result_width(resolved["frac"])) - 1
    positive = np.where(values > 0, values, 1)
    results = goldschmidt_reciprocal(positive, **params)
    return np.where(values > 0, results, saturated)


#: FP32 ``2.0``: the constant of ``F = 2 - Q``.
_TWO = 0x40000000


def _fpu_step(a_bits, b_bits):
    """One MAC of the FPU with a ``+0`` addend, its FP32 result rounded to FP16 (the next MAC's operand)."""
    return fp32_to_fp16(fp32_add(0, fp_mul_exact(a_bits, b_bits, FP16))).astype(np.int64)


def reciprocal_unit_fp16(values, **params):
    """What ``cp_reciprocal`` with ``mac="fp16"`` outputs: ``1 / D`` of FP32 values ``D``, as FP32 bits.

    For each FP32 value ``D = (-1)**s 1.f 2**(E - 127)`` (exponent field ``E``):

    1. Specials (IEEE): ``E`` = 0 (zero or subnormal, flushed) gives ``+-Inf`` of ``D``'s sign, ``+-Inf``
       gives ``+-0``, a NaN the canonical NaN.
    2. Normalise: ``d = 1.f / 2`` in ``[1/2, 1)``, rounded to FP16 (nearest even; may round up to 1);
       ``x0`` = :func:`~trainforge.spec.caterpillar.reciprocal_table_fp16` indexed by the ``table_bits`` top
       bits of ``f``.
    3. MACs (each the exact FP32 product of two FP16 operands plus ``+0``, rounded to FP16: the registers
       hold FP16): ``N = x0``, ``Q = d x0``; per iteration ``F = fp16(2 - Q)`` (the FPU's FP32 adder, then
       FP16 rounding), ``N = N F`` and, except in the last, ``Q = Q F``.
    4. Denormalise: ``N`` widened to FP32 and its exponent lowered by ``E - 126`` (``1/D = (1/d) 2**-(E - 126)``),
       with ``D``'s sign; an exponent field of 0 or below is flushed to a signed zero (1/D below FP32's normals).

    Parameters
    ----------
    values : array_like of int
        FP32 bit patterns.
    **params
        ``table_bits``, ``iterations`` (defaults: the ``cp_reciprocal`` schema's).

    Returns
    -------
    numpy.ndarray of int64
        FP32 bit patterns (unsigned 32-bit values).
    """
    resolved = params_with_defaults(RECIPROCAL_PARAMS, params)
    table_bits, iterations = resolved["table_bits"], resolved["iterations"]
    values = np.asarray(values, dtype=np.int64) & 0xFFFFFFFF
    sign = values >> 31
    exponent = (values >> FP32.fraction_bits) & FP32.exponent_max_field
    fraction = values & FP32.fraction_mask
    d = fp32_to_fp16((np.int64(FP32.bias - 1) << FP32.fraction_bits) | fraction).astype(np.int64)
    n = reciprocal_table_fp16(table_bits)[fraction >> (FP32.fraction_bits - table_bits)]
    q = _fpu_step(d, n)
    for iteration in range(iterations):
        # F = 2 + (-Q): the FPU's FP32 adder on the widened, negated Q, rounded to FP16.
        factor = fp32_to_fp16(fp32_add(_TWO, fp16_to_fp32(q ^ FP16.sign_mask))).astype(np.int64)
        n = _fpu_step(n, factor)
        if iteration < iterations - 1:
            q = _fpu_step(q, factor)
    widened = fp16_to_fp32(n).astype(np.int64)
    field = ((widened >> FP32.fraction_bits) & FP32.exponent_max_field) - (exponent - (FP32.bias - 1))
    result = np.where(field <= 0, 0, (np.clip(field, 0, FP32.exponent_max_field) << FP32.fraction_bits)
                      | (widened & FP32.fraction_mask))
    result = np.where(exponent == 0, FP32.infinity(), result)
    result = np.where((exponent == FP32.exponent_max_field) & (fraction == 0), 0, result)
    result = result | (sign << 31)
    return np.where((exponent == FP32.exponent_max_field) & (fraction != 0), FP32.canonical_nan(), result)


def result_cycles(count, **params):
    """Cycles of ``cp_reciprocal``'s results for ``count`` values offered from cycle 0 on, without backpressure.

    Value ``k`` is accepted at ``k * unit_interval`` and its result is on
    ``o_result`` ``unit_latency`` cycles later.

    Parameters
    ----------
    count : int
        Values offered back to back.
    **params
        ``cp_reciprocal`` parameters (``iterations``; defaults from the schema).

    Returns
    -------
    list of int
    """
    iterations = params_with_defaults(RECIPROCAL_PARAMS, params)["iterations"]
    return [index * unit_interval(iterations) + unit_latency(iterations) for index in range(count)]
