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

__all__ = ["reciprocal_table", "goldschmidt_reciprocal", "result_width", "unit_latency", "reciprocal_unit"]


def reciprocal_table(table_bits, frac):
    """``1 / midpoint`` of each of the ``2 ** table_bits`` intervals of ``[1/2, 1)``, in ``frac`` fraction bits."""
    index = np.arange(1 << table_bits)
    midpoint = 0.5 + (index + 0.5) / (1 << (table_bits + 1))
    return np.round((1 << frac) / midpoint).astype(np.int64)


def goldschmidt_reciprocal(values, *, frac=16, table_bits=3, iterations=2):
    """Fixed-point reciprocals of positive fixed-point values.

    Parameters
    ----------
    values : array_like of int
        Positive numbers with ``frac`` fraction bits (``value / 2**frac``).
    frac : int
        Fraction bits of inputs, intermediate values and results (at most 28).
    table_bits : int
        Lookup-table index bits.
    iterations : int
        Goldschmidt iterations (two MACs each).

    Returns
    -------
    numpy.ndarray of int64
        ``round-down(2**frac / (value / 2**frac))``-like results with ``frac`` fraction bits.
    """
    values = np.asarray(values, dtype=np.int64)
    if np.any(values <= 0):
        raise ValueError("goldschmidt_reciprocal needs positive values")
    if not 1 <= frac <= 28:
        raise ValueError(f"frac = {frac} is out of range 1..28")
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


def result_width(frac):
    """Bits of a reciprocal of ``cp_reciprocal``: ``1 / (2**-frac)`` needs ``2 * frac + 1`` bits, plus one spare."""
    return 2 * frac + 2


def unit_latency(iterations):
    """Cycles of ``cp_reciprocal`` from a value's acceptance to its result on ``o_result`` (no backpressure).

    One MAC ``Q = d * x0`` and then two MACs per iteration, but the last ``Q``
    update is skipped (only ``N`` is the result): ``2 * iterations`` MAC
    cycles, one cycle that writes the output register and one to present it.
    Without backpressure a new value is accepted in the cycle its predecessor's
    result is taken, so the interval between values equals the latency.
    """
    return 2 * iterations + 2


def reciprocal_unit(values, *, frac=16, table_bits=3, iterations=2, **_):
    """What ``cp_reciprocal`` outputs: :func:`goldschmidt_reciprocal`, and all ones for a zero value.

    Parameters
    ----------
    values : array_like of int
        Non-negative values with ``frac`` fraction bits.

    Returns
    -------
    numpy.ndarray of int64
    """
    values = np.asarray(values, dtype=np.int64)
    saturated = (1 << result_width(frac)) - 1
    positive = np.where(values > 0, values, 1)
    results = goldschmidt_reciprocal(positive, frac=frac, table_bits=table_bits, iterations=iterations)
    return np.where(values > 0, results, saturated)
