"""Scenario table of ``nt_comparator``: pooling windows of 1, 4 and 9 rows, ties, extremes, backpressure.

Reference (independent of the golden model): a plain Python loop per lane. A ``first`` row
opens a window with its element as the maximum at position 0; a later row replaces the
maximum only when strictly greater (ties keep the earliest element); positions count
accepted rows since ``first`` modulo ``2**index_bits``; rows before any ``first`` row extend
the reset window (maximum 0, index 0, position 0). A ``last`` row sends every lane's maximum
and index. At full rate a result leaves :data:`~trainforge.spec.neurotrainer.comparator.LATENCY`
cycle after its ``last`` row.
"""
import numpy as np

from trainforge.golden.neurotrainer.comparator import nt_comparator
from trainforge.spec.neurotrainer.comparator import LATENCY

from scenario import Scenario, Transactions, random_pattern, rng_for

_LOW, _HIGH = -(1 << 15), (1 << 15) - 1


def reference(params, rows):
    """The ``o_max`` items for the ``i_row`` items ``rows``."""
    lanes = params["lanes"]
    best, index, position = [0] * lanes, [0] * lanes, 0
    results = []
    for row in rows:
        current = 0 if row["first"] else position
        for lane in range(lanes):
            if row["first"] or row["x"][lane] > best[lane]:
                best[lane], index[lane] = row["x"][lane], current
        position = (current + 1) % (1 << params["index_bits"])
        if row["last"]:
            results.append({"value": list(best), "index": list(index)})
    return results


def _windows(rng, lanes, sizes, low, high):
    rows = []
    for size in sizes:
        for offset in range(size):
            rows.append({"x": [rng.randint(low, high) for _ in range(lanes)],
                         "first": int(offset == 0), "last": int(offset == size - 1)})
    return rows


def _last_rows(rows):
    return [number for number, row in enumerate(rows) if row["last"]]


def scenarios(params, seed):
    lanes = params["lanes"]
    table = []
    rng = rng_for(seed, "nt_comparator", "full rate")
    rows = _windows(rng, lanes, [rng.choice((1, 4, 9)) for _ in range(20)], _LOW, _HIGH)
    table.append(Scenario("random windows at full rate", {"i_row": rows}, {"o_max": reference(params, rows)},
                          timing={"o_max": [number + LATENCY for number in _last_rows(rows)]}))
    extremes = [{"x": [_LOW] * lanes, "first": 1, "last": 0}, {"x": [_LOW] * lanes, "first": 0, "last": 0},
                {"x": [_HIGH] * lanes, "first": 0, "last": 1}, {"x": [_HIGH] * lanes, "first": 1, "last": 0},
                {"x": [_HIGH] * lanes, "first": 0, "last": 1}, {"x": [-1] * lanes, "first": 1, "last": 1}]
    zeros = _windows(rng, lanes, [4, 1, 9], 0, 0)
    table.append(Scenario("all zeros: ties everywhere, index 0", {"i_row": zeros}, {"o_max": reference(params, zeros)}))
    table.append(Scenario("extremes and equal values", {"i_row": extremes}, {"o_max": reference(params, extremes)}))
    before_first = [{"x": [-5] * lanes, "first": 0, "last": 0}, {"x": [7 - lane for lane in range(lanes)],
                                                                 "first": 0, "last": 1}]
    table.append(Scenario("rows before the first 'first' extend the reset window", {"i_row": before_first},
                          {"o_max": reference(params, before_first)}))
    # Past the index range the position wraps (when the range is short enough to simulate).
    long_window = _windows(rng, lanes, [(1 << params["index_bits"]) + 3 if params["index_bits"] <= 6 else 70], -3, 3)
    table.append(Scenario("a long window", {"i_row": long_window},
                          {"o_max": reference(params, long_window)}))
    # A window that sends its maximum at a `last` row and goes on (no `first` after it), against a consumer that
    # lets the output stage fill: the row after the `last` one is the new maximum, so its index (the position
    # counted from `first`) shows whether the `last` row was taken exactly once.
    rows = []
    for window in range(30):
        base = rng.randint(-1000, 1000)
        rows += [{"x": [base] * lanes, "first": 1, "last": 0}, {"x": [base - 1] * lanes, "first": 0, "last": 1},
                 {"x": [base + 1 + lane for lane in range(lanes)], "first": 0, "last": 0},
                 {"x": [base - 2] * lanes, "first": 0, "last": 1}]
    table.append(Scenario("windows going on after a last row, output stage full", {"i_row": rows},
                          {"o_max": reference(params, rows)}, ready={"o_max": (0, 0, 0, 0, 0, 0, 1)}))
    for name, valid, ready, low, high in (("ties under gaps and stalls", 0.7, 0.4, -2, 2),
                                          ("slow consumer", 1.0, 0.2, _LOW, _HIGH)):
        rng = rng_for(seed, "nt_comparator", name)
        rows = _windows(rng, lanes, [rng.choice((1, 2, 4, 9)) for _ in range(25)], low, high)
        table.append(Scenario(name, {"i_row": rows}, {"o_max": reference(params, rows)},
                              valid={"i_row": random_pattern(rng, valid)}, ready={"o_max": random_pattern(rng, ready)}))
    return table


def golden(params, scenario):
    rows = scenario.stimulus["i_row"]
    x = np.array([row["x"] for row in rows], dtype=np.int64).reshape(len(rows), params["lanes"])
    values, indices = nt_comparator(x, [row["first"] for row in rows], [row["last"] for row in rows], **params)
    return Transactions({"o_max": [{"value": [int(v) for v in value], "index": [int(i) for i in index]}
                                   for value, index in zip(values, indices)]})
