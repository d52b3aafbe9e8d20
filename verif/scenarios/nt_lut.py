"""Scenario table of ``nt_lut``: segment boundaries, extremes and random inputs, at full rate and under backpressure.

Reference (independent of the golden model): the function values from Python's
:mod:`math`, the breakpoints and the linear interpolation in Python integers, as the
rule reads (``hw/neurotrainer/docs/lut.md``): with ``u = x + 2**15`` and ``G = 16 - table_bits``,
``y = T[u >> G] + floor((T[(u >> G) + 1] - T[u >> G]) * (u mod 2**G) / 2**G)``, where
``T[n]`` is ``f((n * 2**G - 2**15) / 2**frac_bits) * 2**out_frac_bits`` rounded half to
even and saturated to 16 bits (the most negative value where ``f`` is undefined). At full
rate every result leaves :data:`~trainforge.spec.neurotrainer.lut.LATENCY` cycles after its input.
"""
import math

from trainforge.golden.neurotrainer.lut import nt_lut
from trainforge.spec.neurotrainer.lut import LATENCY

from scenario import Scenario, Transactions, random_pattern, rng_for

_LOW, _HIGH = -(1 << 15), (1 << 15) - 1


def _value(function, x):
    """``f(x)`` as a float; ``None`` where undefined, ``math.inf`` where it overflows."""
    if function == "relu":
        return max(x, 0.0)
    if function == "relu_grad":
        return 1.0 if x > 0 else 0.0
    if function == "tanh":
        return math.tanh(x)
    if function == "tanh_grad":
        return 1.0 - math.tanh(x) ** 2
    if function in ("sigmoid", "sigmoid_grad"):
        sigmoid = 0.5 * (1.0 + math.tanh(0.5 * x))
        return sigmoid if function == "sigmoid" else sigmoid * (1.0 - sigmoid)
    if function == "exp":
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf
    if function == "log":
        return math.log(x) if x > 0 else None
    raise KeyError(function)


def _breakpoint(function, n, params):
    x = (n * (1 << (16 - params["table_bits"])) - (1 << 15)) / (1 << params["frac_bits"])
    value = _value(function, x)
    if value is None:
        return _LOW
    scaled = value * (1 << params["out_frac_bits"])
    if math.isinf(scaled):
        return _HIGH if scaled > 0 else _LOW
    return min(max(round(scaled), _LOW), _HIGH)


def reference(params, inputs):
    """The LUT's outputs for the signed 16-bit ``inputs``, in Python integers."""
    gap_bits = 16 - params["table_bits"]
    points = {}
    outputs = []
    for x in inputs:
        u = x + (1 << 15)
        segment, position = u >> gap_bits, u & ((1 << gap_bits) - 1)
        for n in (segment, segment + 1):
            if n not in points:
                points[n] = _breakpoint(params["function"], n, params)
        low, high = points[segment], points[segment + 1]
        outputs.append(low + ((high - low) * position >> gap_bits))
    return outputs


def _boundaries(params):
    gap = 1 << (16 - params["table_bits"])
    starts = list(range(_LOW, _HIGH + 1, gap))
    if len(starts) > 64:
        starts = starts[::len(starts) // 64]
    edges = [_LOW, _HIGH, 0, 1, -1]
    for start in starts:
        edges += [start, start - 1, start + gap - 1, start + gap // 2]
    return [((edge - _LOW) % (1 << 16)) + _LOW for edge in edges]


def scenarios(params, seed):
    table = []
    edges = _boundaries(params)
    table.append(Scenario("segment boundaries and extremes at full rate", {"i_x": edges},
                          {"o_y": reference(params, edges)},
                          timing={"o_y": [index + LATENCY for index in range(len(edges))]}))
    table.append(Scenario("all zeros", {"i_x": [0] * 12}, {"o_y": reference(params, [0] * 12)},
                          ready={"o_y": (0, 1, 1)}))
    for name, valid, ready in (("producer gaps, consumer stalls", 0.7, 0.5), ("full producer, slow consumer", 1.0, 0.3)):
        rng = rng_for(seed, "nt_lut", name)
        inputs = [rng.randint(_LOW, _HIGH) for _ in range(150)]
        table.append(Scenario(name, {"i_x": inputs}, {"o_y": reference(params, inputs)},
                              valid={"i_x": random_pattern(rng, valid)}, ready={"o_y": random_pattern(rng, ready)}))
    return table


def golden(params, scenario):
    return Transactions({"o_y": [int(y) for y in nt_lut(scenario.stimulus["i_x"], **params)]})
