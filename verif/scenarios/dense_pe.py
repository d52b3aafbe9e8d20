"""Scenario table of ``dense_pe``: random and corner rows under valid gaps and backpressure.

Reference: each ``read`` row's result is the sum, in Python integers, of
``a[k] * b[k]`` over the rows since the last ``clear`` (inclusive), reduced
modulo ``2 ** acc_width`` and read as two's complement when ``signed``. At
full rate a result leaves :data:`~trainforge.spec.dense_pe.LATENCY` cycles
after its ``read`` row was accepted, and rows are accepted one per cycle.
"""
import numpy as np

from trainforge.golden.dense_pe import dense_pe
from trainforge.spec import dense_pe as spec

from scenario import Scenario, Transactions, random_pattern, rng_for


def operand_range(params):
    if params["signed"]:
        return -(1 << (params["width"] - 1)), (1 << (params["width"] - 1)) - 1
    return 0, (1 << params["width"]) - 1


def reference(rows, params):
    """Expected results of ``rows`` (dicts with a, b, clear, read), in plain Python integers."""
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
        timing = {"o_sum": [index + spec.LATENCY for index, row in enumerate(rows) if row["read"]]}
    return Scenario(name, {"i_row": rows}, {"o_sum": expected}, valid={"i_row": valid}, ready={"o_sum": ready},
                    timing=timing)


def scenarios(params, seed):
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
    return Transactions({"o_sum": [int(value) for value in dense_pe(a, b, clear, read, **params)]})
