"""Scenario table of ``dense_pe``: random and corner rows under valid gaps and backpressure, for every MAC unit.

Reference, integer MAC: each ``read`` row's result is the sum, in Python
integers, of ``a[k] * b[k]`` over the rows since the last ``clear``
(inclusive), reduced modulo ``2 ** acc_width`` and read as two's complement
when ``signed``.

Reference, FP MACs (``fp16``, ``bf16``): numpy float32 arithmetic in the
hardware's order, independent of ``golden/fp.py``: each operand read as a
float (FP16 through ``numpy.float16``, BF16 as the top half of a float32),
subnormal operands flushed to zeros of their sign; each product a float32
product (exact), flushed; the lanes summed pairwise, level by level (``0+1,
2+3, ...``, an odd last lane carried up), each float32 sum flushed; then the
interleaved accumulator (:mod:`trainforge.spec.mac`): the rows since the last
``clear`` numbered from 0, row ``j`` added to partial ``j mod P`` (``P`` =
``partial_sums``; ``+0`` at its first row), flushed; a ``read`` row's result
the same pairwise sum over the ``P`` partials, those not written since the
clear as ``+0``. The flush
(:func:`scenarios.fp_mul.flush32`) is the only step numpy does not do
itself; a NaN result is expected as the canonical quiet NaN ``0x7FC00000``.

At full rate a result leaves :func:`~trainforge.spec.dense_pe.latency`
cycles after its ``read`` row was accepted, and rows are accepted one per cycle.
"""
import numpy as np

from trainforge.golden.dense_pe import dense_pe
from trainforge.spec import dense_pe as spec
from trainforge.spec.mac import is_float

from scenario import Scenario, Transactions, random_pattern, rng_for
from scenarios.fp_mul import float32_bits, flush32, to_float32


def operand_range(params):
    if params["signed"]:
        return -(1 << (params["width"] - 1)), (1 << (params["width"] - 1)) - 1
    return 0, (1 << params["width"]) - 1


def pairwise_float32_sum(values):
    """``values`` (float32) summed level by level, ``0+1, 2+3, ...`` (an odd last one carried up), each sum flushed."""
    level = list(values)
    with np.errstate(all="ignore"):
        while len(level) > 1:
            level = [flush32(level[k] + level[k + 1]) for k in range(0, len(level) - 1, 2)] + \
                level[len(level) - len(level) % 2:]
    return level[0]


def interleaved_float32_sums(row_sums, clear, read, partials):
    """The interleaved accumulator's value after each ``read`` row, in numpy float32 (module docstring)."""
    results, values, since_clear = [], [np.float32(0)] * partials, 0
    with np.errstate(all="ignore"):
        for row_sum, cleared, wanted in zip(row_sums, clear, read):
            since_clear = 0 if cleared else since_clear
            index = since_clear % partials
            values[index] = flush32((values[index] if since_clear >= partials else np.float32(0)) + row_sum)
            since_clear += 1
            if wanted:
                results.append(pairwise_float32_sum(
                    [value if k < since_clear else np.float32(0) for k, value in enumerate(values)]))
    return results


def float_reference(rows, params):
    """Expected FP32 results of ``rows`` (dicts with a, b, clear, read), in numpy float32 arithmetic."""
    with np.errstate(all="ignore"):
        row_sums = [pairwise_float32_sum([flush32(to_float32(x, params["mac"]) * to_float32(y, params["mac"]))
                                          for x, y in zip(row["a"], row["b"])]) for row in rows]
    return [float32_bits(total) for total in interleaved_float32_sums(
        row_sums, [row["clear"] for row in rows], [row["read"] for row in rows], params["partial_sums"])]


def reference(rows, params):
    """Expected results of ``rows`` (dicts with a, b, clear, read), in plain Python integers."""
    if is_float(params):
        return float_reference(rows, params)
    bits = params["acc_width"]
    results, total = [], 0
    for row in rows:
        if row["clear"]:
            total = 0
        total += sum(x * y for x, y in zip(row["a"], row["b"]))
        if row["read"]:
            value = total % (1 << bits)
            if params["signed"] and value >= 1 << (bits - 1):
                value -= 1 << bits
            results.append(value)
    return results


def _random_rows(rng, params, count, clear_probability=0.15, read_probability=0.3):
    low, high = operand_range(params)
    rows = []
    for index in range(count):
        rows.append({
            "a": [rng.randint(low, high) for _ in range(params["lanes"])],
            "b": [rng.randint(low, high) for _ in range(params["lanes"])],
            "clear": int(index == 0 or rng.random() < clear_probability),
            "read": int(index == count - 1 or rng.random() < read_probability),
        })
    return rows


def _constant_rows(params, a, b, count=64):
    lanes = params["lanes"]
    return [{"a": [a] * lanes, "b": [b] * lanes, "clear": int(index == 0), "read": 1} for index in range(count)]


def _scenario(name, rows, params, valid=(1,), ready=(1,), timed=False):
    expected = reference(rows, params)
    timing = {}
    if timed:
        timing = {"o_sum": [index + spec.latency(params) for index, row in enumerate(rows) if row["read"]]}
    return Scenario(name, {"i_row": rows}, {"o_sum": expected}, valid={"i_row": valid}, ready={"o_sum": ready},
                    timing=timing)


#: FP operand bit patterns by format: +0, -0, a subnormal, +Inf, -Inf, a quiet NaN, the largest finite, 1.0, -1.0.
FLOAT_SPECIALS = {
    "fp16": {"+0": 0x0000, "-0": 0x8000, "subnormal": 0x0201, "+inf": 0x7C00, "-inf": 0xFC00, "nan": 0x7E01,
             "max": 0x7BFF, "one": 0x3C00, "minus one": 0xBC00},
    "bf16": {"+0": 0x0000, "-0": 0x8000, "subnormal": 0x0041, "+inf": 0x7F80, "-inf": 0xFF80, "nan": 0x7FC1,
             "max": 0x7F7F, "one": 0x3F80, "minus one": 0xBF80},
}


def float_bits(value, format_name):
    """Bits of a Python float in the operand format (FP16 by numpy's rounding, BF16 truncated from float32)."""
    if format_name == "fp16":
        return int(np.array([value], dtype=np.float16).view(np.uint16)[0])
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0]) >> 16


def _random_float_operand(rng, format_name, special_probability=0.05):
    if rng.random() < special_probability:
        return FLOAT_SPECIALS[format_name][rng.choice(("+0", "-0", "subnormal"))]
    return float_bits(rng.choice((-1, 1)) * rng.uniform(0.01, 8.0), format_name)


def random_float_rows(rng, params, count, clear_probability=0.15, read_probability=0.3):
    rows = []
    for index in range(count):
        rows.append({
            "a": [_random_float_operand(rng, params["mac"]) for _ in range(params["lanes"])],
            "b": [_random_float_operand(rng, params["mac"]) for _ in range(params["lanes"])],
            "clear": int(index == 0 or rng.random() < clear_probability),
            "read": int(index == count - 1 or rng.random() < read_probability),
        })
    return rows


def float_scenarios(params, seed):
    """The FP MACs' table: random values, bit patterns, zeros, Inf/NaN rows, cancellation, overflow."""
    lanes, name = params["lanes"], params["mac"]
    special = FLOAT_SPECIALS[name]
    table = []
    rng = rng_for(seed, "dense_pe", name, "random")
    table.append(_scenario("random values with backpressure", random_float_rows(rng, params, 200), params,
                           valid=random_pattern(rng, 0.7), ready=random_pattern(rng, 0.5)))
    rng = rng_for(seed, "dense_pe", name, "full rate")
    table.append(_scenario("one row per cycle", random_float_rows(rng, params, 100, read_probability=0.5),
                           params, timed=True))
    rng = rng_for(seed, "dense_pe", name, "bits")
    rows = [{"a": [rng.getrandbits(16) for _ in range(lanes)], "b": [rng.getrandbits(16) for _ in range(lanes)],
             "clear": int(rng.random() < 0.5), "read": 1} for _ in range(40)]
    table.append(_scenario("random bit patterns", rows, params, ready=(1, 0)))

    def row(a, b, clear=0, read=1):
        return {"a": [a] * lanes, "b": [b] * lanes, "clear": clear, "read": read}

    zeros = [row(special["+0"], special["one"], clear=1), row(special["-0"], special["one"]),
             row(special["-0"], special["one"], clear=1), row(special["subnormal"], special["minus one"]),
             row(special["subnormal"], special["subnormal"], clear=1)]
    table.append(_scenario("zeros, signed zeros and flushed subnormals", zeros, params, timed=True))
    infinities = [row(special["one"], special["one"], clear=1), row(special["+inf"], special["one"]),
                  row(special["one"], special["one"]), row(special["-inf"], special["one"], clear=1),
                  row(special["+inf"], special["one"]), row(special["+inf"], special["+0"], clear=1),
                  row(special["nan"], special["one"], clear=1), row(special["one"], special["one"]),
                  row(special["one"], special["one"], clear=1)]
    table.append(_scenario("Inf and NaN rows, then a clear", infinities, params, ready=(1, 1, 0)))
    x, y = float_bits(1.5, name), float_bits(-1.5, name)
    mixed = [{"a": [x if lane % 2 == 0 else y for lane in range(lanes)], "b": [special["one"]] * lanes,
              "clear": 1, "read": 1}]
    big, small = float_bits(2.0 ** 10, name), float_bits(2.0 ** -9, name)
    cancel = [row(big, big, clear=1, read=0), row(small, special["one"], read=1),
              row(big, float_bits(-(2.0 ** 10), name), read=1), *mixed,
              row(special["max"], special["max"], clear=1), row(special["max"], special["max"])]
    table.append(_scenario("cancellation, lost low bits, largest products", cancel, params, timed=True))
    return table


def scenarios(params, seed):
    if is_float(params):
        return float_scenarios(params, seed)
    low, high = operand_range(params)
    extreme = low if params["signed"] else high
    table = []
    rng = rng_for(seed, "dense_pe", "random")
    table.append(_scenario("random rows with backpressure", _random_rows(rng, params, 300), params,
                           valid=random_pattern(rng, 0.7), ready=random_pattern(rng, 0.5)))
    rng = rng_for(seed, "dense_pe", "full rate")
    table.append(_scenario("one row per cycle", _random_rows(rng, params, 150, read_probability=0.5), params,
                           timed=True))
    table.append(_scenario("all zeros", _constant_rows(params, 0, 0), params, ready=(1, 0, 1)))
    table.append(_scenario("largest products, wrapping", _constant_rows(params, extreme, extreme), params,
                           valid=(1, 1, 0), ready=(0, 1, 1, 1)))
    table.append(_scenario("largest mixed products", _constant_rows(params, high, extreme), params,
                           ready=(1, 0)))
    rows = [{"a": [1] * params["lanes"], "b": [1] * params["lanes"], "clear": 1, "read": 1},
            {"a": [0] * params["lanes"], "b": [0] * params["lanes"], "clear": 1, "read": 1},
            {"a": [1] * params["lanes"], "b": [high] * params["lanes"], "clear": 0, "read": 0},
            {"a": [1] * params["lanes"], "b": [1] * params["lanes"], "clear": 0, "read": 1}]
    table.append(_scenario("one-row dot products, clear of a zero row", rows, params, timed=True))
    return table


def golden(params, scenario):
    rows = scenario.stimulus["i_row"]
    a = np.array([row["a"] for row in rows], dtype=np.int64)
    b = np.array([row["b"] for row in rows], dtype=np.int64)
    clear = np.array([row["clear"] for row in rows], dtype=bool)
    read = np.array([row["read"] for row in rows], dtype=bool)
    if len(rows) == 0:
        return Transactions({"o_sum": []})
    return Transactions({"o_sum": [int(value) for value in dense_pe(a, b, clear, read, **params)]})
