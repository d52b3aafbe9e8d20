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
"""
import numpy as np

from ...errors import ParameterError, ProgramError
from ...spec.caterpillar import (RECIPROCAL_PARAMS, params_with_defaults, reciprocal_table, result_width,
                                 unit_interval, unit_latency)

__all__ = ["reciprocal_table", "goldschmidt_reciprocal", "result_width", "unit_latency", "unit_interval",
           "reciprocal_unit", "result_cycles"]


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
    values = np.asarray(values, dtype=np.int64)
    saturated = (1 << result_width(params_with_defaults(RECIPROCAL_PARAMS, params)["frac"])) - 1
    positive = np.where(values > 0, values, 1)
    results = goldschmidt_reciprocal(positive, **params)
    return np.where(values > 0, results, saturated)


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
