"""Scenario table of ``fp_mul``: random bit patterns, random normal values, and every pair of corner operands.

Reference: numpy's IEEE arithmetic, independent of ``golden/fp.py``. The
operands are read as ``numpy.float16`` (FP16) or as the top half of a
``numpy.float32`` (BF16, exact), subnormal operands are flushed to zeros of
their sign, the product is numpy's float32 product (exact for these
significands, IEEE on overflow and underflow), and a subnormal product is
flushed to a zero of its sign: numpy expresses the whole policy here. A NaN
product is expected as the canonical quiet NaN ``0x7FC00000``. At full rate a
product leaves :func:`~trainforge.spec.fp_units.latency` cycles after its
operands were accepted.
"""
import numpy as np

from trainforge.golden.fp_mul import fp_mul
from trainforge.spec import fp_units as spec
from trainforge.spec.mac import FLOAT_FORMATS

from scenario import Scenario, Transactions, random_pattern, rng_for

#: The canonical quiet NaN of IEEE binary32 (the policy's NaN result).
QUIET_NAN32 = 0x7FC00000
#: The smallest normal float32 magnitude.
MIN_NORMAL32 = np.float32(2.0 ** -126)

#: Corner operands: zeros, subnormals, smallest normal, largest finite, infinities, quiet and signalling NaNs,
#: ordinary values, and (BF16) values whose squares overflow or underflow FP32.
CORNERS = {
    "fp16": (0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
             0x3C00, 0xBE00, 0x3BFF, 0x0401),
    "bf16": (0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFF81,
             0x3F80, 0xBFC0, 0x3F7F, 0x1F80, 0x2000, 0x5F80, 0x5F00),
}


def flush32(value):
    """A float32 below the smallest normal magnitude becomes a zero of its sign."""
    value = np.float32(value)
    if not np.isnan(value) and abs(value) < MIN_NORMAL32:
        return np.copysign(np.float32(0), value)
    return value


def to_float32(bits, format_name):
    """The value of a 16-bit operand as a float32, flushed (input flush)."""
    if format_name == "fp16":
        value = np.array([bits], dtype=np.uint16).view(np.float16)[0]
        if not np.isnan(value) and abs(value) < np.float16(2.0 ** -14):
            value = np.copysign(np.float16(0), value)
        return np.float32(value)
    return flush32(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])


def float32_bits(value):
    """Bits of a float32 result; any NaN is the canonical quiet NaN."""
    if np.isnan(value):
        return QUIET_NAN32
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


def reference_product(a, b, format_name):
    with np.errstate(all="ignore"):
        product = np.float32(to_float32(a, format_name) * to_float32(b, format_name))
    return float32_bits(flush32(product))


def _random_normal(rng, fmt):
    exponent = rng.randint(1, fmt.exponent_max_field - 1)
    sign = rng.getrandbits(1) << (fmt.width - 1)
    return sign | (exponent << fmt.fraction_bits) | rng.getrandbits(fmt.fraction_bits)


def _scenario(name, pairs, params, valid=(1,), ready=(1,), timed=False):
    items = [{"a": a, "b": b} for a, b in pairs]
    expected = [reference_product(a, b, params["format"]) for a, b in pairs]
    timing = {"o_product": [index + spec.latency(params) for index in range(len(pairs))]} if timed else {}
    return Scenario(name, {"i_operands": items}, {"o_product": expected}, valid={"i_operands": valid},
                    ready={"o_product": ready}, timing=timing)


def scenarios(params, seed):
    fmt = FLOAT_FORMATS[params["format"]]
    rng = rng_for(seed, "fp_mul", "bits")
    table = [_scenario("random bit patterns with backpressure",
                       [(rng.getrandbits(16), rng.getrandbits(16)) for _ in range(150)], params,
                       valid=random_pattern(rng, 0.7), ready=random_pattern(rng, 0.5))]
    rng = rng_for(seed, "fp_mul", "normal")
    table.append(_scenario("random normal values, one pair per cycle",
                           [(_random_normal(rng, fmt), _random_normal(rng, fmt)) for _ in range(100)], params,
                           timed=True))
    corners = CORNERS[params["format"]]
    table.append(_scenario("every pair of corner operands", [(a, b) for a in corners for b in corners], params,
                           ready=(1, 1, 0)))
    return table


def golden(params, scenario):
    items = scenario.stimulus["i_operands"]
    a = np.array([item["a"] for item in items], dtype=np.int64)
    b = np.array([item["b"] for item in items], dtype=np.int64)
    products = fp_mul(a, b, **params)
    return Transactions({"o_product": [int(value) for value in products]})
