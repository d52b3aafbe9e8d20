"""Scenario table of ``cp_reciprocal``: directed corners and values of every magnitude, with and without stalls.

Reference (independent of the vectorised golden model): the integer recipe of
the Goldschmidt reciprocal written out on Python ints, one value at a time,
with the lookup table from exact rational arithmetic:

- ``L = value.bit_length()``, ``d = value`` shifted right by ``L - frac`` (left if negative);
- ``x0 = round(2**frac / m)`` with the interval midpoint
  ``m = (2**(t+1) + 2 i + 1) / 2**(t+2)`` (``t = table_bits``, ``i`` the ``t`` bits of ``d`` after its
  leading one); the quotient is never a tie (odd denominator), so rounding half up is exact;
- ``N = x0``, ``Q = (d N) >> frac``; per iteration ``F = 2**(frac+1) - Q``, ``N = (N F) >> frac``,
  ``Q = (Q F) >> frac`` (truncating shifts);
- the result ``N`` shifted back by ``L - frac``; a zero value gives all ones in ``2 frac + 2`` bits.

Timing: without stalls a value is taken every ``2 * iterations + 1`` cycles and its result leaves
``2 * iterations + 2`` cycles after it was taken (one MAC for ``Q = d x0``, two per iteration less the
last ``Q``, one cycle that hands the result to the output stream stage and that stage's one cycle); the
next value is taken in the hand-off cycle.

``mac="fp16"`` (values and results FP32 bit patterns): the reference is the recipe of
hw/caterpillar/README.md ("Goldschmidt reciprocal on the FPU") on numpy floats, one value at a time:
``|D| = m 2**e`` with ``m`` in ``[1/2, 1)`` (``numpy.frexp``); ``d = float16(m)``; ``x0 = float16(1 / midpoint)``
of the interval of ``m`` (float64 arithmetic); each MAC ``float16(float32(a) * float32(b) + 0)``; each factor
``float16(2 - float32(Q))``; the result ``float64(N) 2**-e`` with ``D``'s sign, zero below ``2**-126``; zero
and subnormals give ``+-Inf``, ``+-Inf`` gives ``+-0``, NaN the canonical NaN. The cycles are the fixed unit's.
"""
import math

import numpy as np

from trainforge.golden.caterpillar import goldschmidt as golden_model

from scenario import Scenario, Transactions, random_pattern, rng_for

#: (name, valid probability, ready probability) of the random scenarios with stalls.
HANDSHAKES = (
    ("producer gaps, consumer stalls", 0.6, 0.5),
    ("full producer, slow consumer", 1.0, 0.3),
    ("slow producer, full consumer", 0.3, 1.0),
)


def reference(value, *, width, frac, table_bits, iterations, **_):
    """The reciprocal of one value by the integer recipe above."""
    if value == 0:
        return (1 << (2 * frac + 2)) - 1
    shift = value.bit_length() - frac
    d = value >> shift if shift >= 0 else value << -shift
    index = (d >> (frac - 1 - table_bits)) & ((1 << table_bits) - 1)
    numerator = 1 << (frac + table_bits + 2)
    denominator = (1 << (table_bits + 1)) + 2 * index + 1
    n = (2 * numerator + denominator) // (2 * denominator)
    q = (d * n) >> frac
    for _ in range(iterations):
        factor = (2 << frac) - q
        n = (n * factor) >> frac
        q = (q * factor) >> frac
    return n >> shift if shift >= 0 else n << -shift


def reference_fp16(value, *, table_bits, iterations, **_):
    """The FP32 bits of ``1 / D`` for the FP32 bits ``value``, by the numpy recipe above."""
    magnitude = np.uint32(value & 0x7FFFFFFF).view(np.float32)
    sign = value >> 31
    if np.isnan(magnitude):
        return 0x7FC00000
    if np.isinf(magnitude):
        return sign << 31
    if magnitude < np.float32(2.0 ** -126):
        return (sign << 31) | 0x7F800000
    mantissa, exponent = math.frexp(float(magnitude))
    index = int((2 * mantissa - 1) * (1 << table_bits))
    midpoint = 0.5 + (index + 0.5) / (1 << (table_bits + 1))
    d, n = np.float16(mantissa), np.float16(1.0 / midpoint)

    def mac(a, b):
        return np.float16(np.float32(np.float32(a) * np.float32(b)) + np.float32(0.0))

    q = mac(d, n)
    for iteration in range(iterations):
        factor = np.float16(np.float32(2.0) - np.float32(q))
        n = mac(n, factor)
        if iteration < iterations - 1:
            q = mac(q, factor)
    result = float(n) * 2.0 ** -exponent
    if result < 2.0 ** -126:
        result = 0.0
    return (sign << 31) | int(np.float32(result).view(np.uint32))


def _fp32_values(rng, count):
    """FP32 normals of random sign, exponent and fraction."""
    return [(rng.randrange(2) << 31) | (rng.randint(1, 254) << 23) | rng.getrandbits(23) for _ in range(count)]


def _fp32_corners(table_bits):
    """Signed zeros and subnormals (-> Inf), infinities (-> 0), NaNs, one, the smallest and largest normals
    (1/D below FP32's normals: flushed), powers of two, significands next to 2, each table interval's start."""
    values = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001,
              0x3F800000, 0xBF800000, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7E800000, 0x3FFFFFFF,
              0x3FFFF000, 0x40000000, 0x42C80000, 0x3DCCCCCD]
    values += [(127 << 23) | (index << (23 - table_bits)) for index in range(1 << table_bits)]
    return values


def _fp16_scenarios(params, seed):
    latency = 2 * params["iterations"] + 2

    def scenario(name, values, **handshake):
        return Scenario(name, {"i_value": values},
                        {"o_result": [reference_fp16(value, **params) for value in values]}, **handshake)

    rng = rng_for(seed, "cp_reciprocal", "fp16 full rate")
    values = _fp32_values(rng, 40)
    table = [scenario("fp16: full rate, cycle exact", values,
                      timing={"o_result": [index * (latency - 1) + latency for index in range(len(values))]})]
    rng = rng_for(seed, "cp_reciprocal", "fp16 corners")
    table.append(scenario("fp16: directed corners", _fp32_corners(params["table_bits"]),
                          valid={"i_value": random_pattern(rng, 0.8)}, ready={"o_result": random_pattern(rng, 0.7)}))
    rng = rng_for(seed, "cp_reciprocal", "fp16 stalls")
    table.append(scenario("fp16: producer gaps, consumer stalls", _fp32_values(rng, 60),
                          valid={"i_value": random_pattern(rng, 0.6)}, ready={"o_result": random_pattern(rng, 0.5)}))
    return table


def _values_of_every_magnitude(rng, width, count):
    """A random bit length, then random bits below the leading one."""
    values = []
    for _ in range(count):
        length = rng.randint(1, width)
        values.append((1 << (length - 1)) | rng.getrandbits(length - 1) if length > 1 else 1)
    return values


def _corners(width, frac, table_bits):
    """Zero (saturates), one LSB, the largest value, powers of two and their neighbours, table interval starts."""
    values = [0, 0, 1, (1 << width) - 1, 1 << frac, (1 << frac) - 1, (1 << frac) + 1]
    values += [1 << bit for bit in range(width)] + [(1 << bit) - 1 for bit in range(2, width + 1)]
    values += [(1 << (frac - 1)) + (index << (frac - 1 - table_bits)) for index in range(1 << table_bits)]
    return [value for value in values if value < 1 << width]


def scenarios(params, seed):
    if params.get("mac") == "fp16":
        return _fp16_scenarios(params, seed)
    width = params["width"]
    latency = 2 * params["iterations"] + 2
    interval = latency - 1

    def scenario(name, values, **handshake):
        return Scenario(name, {"i_value": values}, {"o_result": [reference(value, **params) for value in values]},
                        **handshake)

    table = []
    rng = rng_for(seed, "cp_reciprocal", "full rate")
    values = _values_of_every_magnitude(rng, width, 40)
    table.append(scenario("full rate, cycle exact", values,
                          timing={"o_result": [index * interval + latency for index in range(len(values))]}))
    rng = rng_for(seed, "cp_reciprocal", "corners")
    table.append(scenario("directed corners", _corners(width, params["frac"], params["table_bits"]),
                          valid={"i_value": random_pattern(rng, 0.8)}, ready={"o_result": random_pattern(rng, 0.7)}))
    for name, valid, ready in HANDSHAKES:
        rng = rng_for(seed, "cp_reciprocal", name)
        table.append(scenario(name, _values_of_every_magnitude(rng, width, 60),
                              valid={"i_value": random_pattern(rng, valid)},
                              ready={"o_result": random_pattern(rng, ready)}))
    return table


def golden(params, scenario):
    values = scenario.stimulus["i_value"]
    results = [int(result) for result in golden_model.reciprocal_unit(values, **params)]
    cycles = {}
    if not scenario.valid and not scenario.ready:  # the golden latency holds without stalls
        cycles["o_result"] = golden_model.result_cycles(len(values), **params)
    return Transactions({"o_result": results}, cycles)
