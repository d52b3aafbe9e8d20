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
"""
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
