"""Scenario table of ``td_tile``: the streams of :mod:`scenarios.td_pe`, with one A stream per column and one B stream per row.

Reference for the values: numpy ``dot`` of B stream ``r`` with A stream ``c``
per row, summed from ``clear`` to ``read`` in Python integers and wrapped
(:func:`scenarios.td_pe.reference`). Cycles at full rate: the golden tile
cycle model (B-only skipping, rows synchronized).
"""
from scenarios.td_pe import make_golden, make_scenarios

__all__ = ["scenarios", "golden"]


def scenarios(params, seed):
    return make_scenarios(params, seed, "td_tile", (params["rows"], params["cols"]))


def golden(params, scenario):
    return make_golden(params, scenario, (params["rows"], params["cols"]))
