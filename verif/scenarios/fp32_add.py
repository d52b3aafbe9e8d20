"""Scenario table of ``fp32_add``: random bit patterns, near exponents (cancellation), corners, hand-picked cases.

Reference: numpy's IEEE float32 addition, independent of ``golden/fp.py``,
with subnormal operands flushed to zeros of their sign beforehand and a
subnormal sum flushed to a zero of its sign afterwards (numpy expresses the
whole policy here; the flush is :func:`scenarios.fp_mul.flush32`). A NaN sum
is expected as the canonical quiet NaN ``0x7FC00000``. At full rate a sum
leaves :func:`~trainforge.spec.fp_units.latency` cycles after its operands
were accepted.
"""
import numpy as np

from trainforge.golden.fp32_add import fp32_add
from trainforge.spec import fp_units as spec

from scenario import Scenario, Transactions, random_pattern, rng_for
from scenarios.fp_mul import float32_bits, flush32

#: Corner operands: zeros, subnormals, smallest normals, largest finite, infinities, quiet and signalling NaNs,
#: 1, just above -1, 2**-24 (half an ulp of 1) and 2**24.
CORNERS = (0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800001, 0x7F7FFFFF, 0xFF7FFFFF,
           0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001, 0x3F800000, 0xBF800001, 0x33800000, 0x4B800000)

#: Hand-picked pairs: ties to even (down, up), just above a tie, cancellation to 2**-23 and to +0, overflow by
#: rounding (the largest finite plus half its ulp), a difference below the smallest normal (flushed, both signs),
#: a far smaller operand (sticky only), 1.5 + 1.5 (carry out).
CASES = ((0x3F800000, 0x33800000), (0x3F800001, 0x33800000), (0x3F800000, 0x33800001),
         (0x3F800001, 0xBF800000), (0x40490FDB, 0xC0490FDB), (0x7F7FFFFF, 0x73000000),
         (0x00800001, 0x80800000), (0x80800001, 0x00800000), (0x4B800000, 0x3F7FFFFF),
         (0x3FC00000, 0x3FC00000), (0xC0000000, 0x3FFFFFFF))


def sticky_pairs():
    """Pairs whose rounding turns on the sticky bit alone, for every exponent difference the aligner keeps.

    The larger operand is ``2**d``; the smaller, at exponent 0, has its hidden one, its guard bit set after
    a shift by ``d`` (round bit and kept bits zero), and one more bit ``k`` places below the round bit:
    ``k = 1`` is the sticky position itself (kept), ``k = 2`` and ``k = 3`` are shifted out (sticky set).
    Without the sticky bit a sum is a tie and rounds to even; with it, it rounds away. Both signs of the
    smaller operand (addition and subtraction).
    """
    pairs = []
    for difference in range(1, 26):
        for below in (1, 2, 3):
            low = difference - below + 1          # the bit's place in the 27-bit extended significand
            extended = (1 << 26) | (1 << (difference + 2))
            if low < 3 or difference + 2 >= 26:
                continue
            extended |= 1 << low
            small = (127 << 23) | ((extended >> 3) & 0x7FFFFF)
            big = (127 + difference) << 23
            pairs += [(big, small), (big, small | 0x80000000)]
    return pairs


def cancellation_pairs(rng):
    """Operands of opposite signs whose sum cancels all but the low ``k`` bits, for every ``k``: every shift of
    the normalizer. Same exponent, the low ``k`` fraction bits redrawn; and exponent difference one, the smaller
    operand's significand just below twice its hidden one."""
    pairs = []
    for kept in range(1, 24):
        for _ in range(4):
            exponent = rng.randint(30, 220)
            a = _random_normal(rng, exponent)
            low = (1 << kept) - 1
            b = (a ^ 0x80000000) & ~low | rng.getrandbits(kept)
            pairs.append((a, b))
        for _ in range(2):
            exponent = rng.randint(30, 220)
            fraction = rng.getrandbits(kept)
            a = (rng.getrandbits(1) << 31) | (exponent << 23) | fraction
            b = (a & 0x80000000 ^ 0x80000000) | ((exponent - 1) << 23) | (0x7FFFFF & ~((1 << kept) - 1)) \
                | rng.getrandbits(kept)
            pairs.append((a, b))
    return pairs


def exponent_difference_pairs(rng):
    """Random normals at every exponent difference 0..30 (the aligner's shifts and beyond), both signs."""
    pairs = []
    for difference in range(31):
        for _ in range(4):
            exponent = rng.randint(40, 200)
            pairs.append((_random_normal(rng, exponent + difference), _random_normal(rng, exponent)))
    return pairs


def as_float32(bits):
    return flush32(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def reference_sum(a, b):
    with np.errstate(all="ignore"):
        total = np.float32(as_float32(a) + as_float32(b))
    return float32_bits(flush32(total))


def _random_normal(rng, exponent):
    return (rng.getrandbits(1) << 31) | (exponent << 23) | rng.getrandbits(23)


def _scenario(name, pairs, valid=(1,), ready=(1,), timed_params=None):
    items = [{"a": a, "b": b} for a, b in pairs]
    expected = [reference_sum(a, b) for a, b in pairs]
    timing = {}
    if timed_params is not None:
        timing = {"o_sum": [index + spec.latency(timed_params) for index in range(len(pairs))]}
    return Scenario(name, {"i_operands": items}, {"o_sum": expected}, valid={"i_operands": valid},
                    ready={"o_sum": ready}, timing=timing)


def scenarios(params, seed):
    rng = rng_for(seed, "fp32_add", "bits")
    table = [_scenario("random bit patterns with backpressure",
                       [(rng.getrandbits(32), rng.getrandbits(32)) for _ in range(120)],
                       valid=random_pattern(rng, 0.7), ready=random_pattern(rng, 0.5))]
    rng = rng_for(seed, "fp32_add", "near")
    pairs = []
    for _ in range(120):
        exponent = rng.randint(1, 254)
        other = min(254, max(1, exponent + rng.randint(-3, 3)))
        pairs.append((_random_normal(rng, exponent), _random_normal(rng, other)))
    table.append(_scenario("random normals with near exponents, one pair per cycle", pairs, timed_params=params))
    table.append(_scenario("every pair of corner operands", [(a, b) for a in CORNERS for b in CORNERS],
                           ready=(1, 0, 1)))
    table.append(_scenario("rounding, cancellation, overflow, underflow", [*CASES, *((b, a) for a, b in CASES)],
                           timed_params=params))
    table.append(_scenario("the sticky bit at every exponent difference", sticky_pairs()))
    table.append(_scenario("the sticky bit at every exponent difference, smaller operand first",
                           [(small, big) for big, small in sticky_pairs()]))
    rng = rng_for(seed, "fp32_add", "cancellation")
    table.append(_scenario("cancellation to every number of kept bits", cancellation_pairs(rng)))
    rng = rng_for(seed, "fp32_add", "differences")
    table.append(_scenario("random normals at every exponent difference 0..30", exponent_difference_pairs(rng)))
    return table


def golden(params, scenario):
    items = scenario.stimulus["i_operands"]
    a = np.array([item["a"] for item in items], dtype=np.int64)
    b = np.array([item["b"] for item in items], dtype=np.int64)
    return Transactions({"o_sum": [int(value) for value in fp32_add(a, b, **params)]})
