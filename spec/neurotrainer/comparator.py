"""What the comparator unit's generator and golden model share: parameters and latency.

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``index_bits``.
"""
from amaranth import signed, unsigned
from amaranth.lib import data

from ..params import Param, ParamSchema

__all__ = ["PARAMS", "LATENCY", "row_layout", "result_layout"]

#: The parameters of ``nt_comparator``.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "comparators k", minimum=1, maximum=64),
    Param("index_bits", int, 8, "argmax index width (window of up to 2**index_bits elements)",
          minimum=1, maximum=16),
))

#: Cycles from the acceptance of a ``last`` row to its result on ``o_max``, without stalls.
LATENCY = 1


def row_layout(params):
    """Payload of ``i_row``: ``x`` (``lanes`` signed 16-bit elements), ``first``, ``last``."""
    return data.StructLayout({"x": data.ArrayLayout(signed(16), params["lanes"]), "first": 1, "last": 1})


def result_layout(params):
    """Payload of ``o_max``: ``value`` (``lanes`` signed 16-bit maxima) and ``index`` (``lanes`` indices)."""
    return data.StructLayout({"value": data.ArrayLayout(signed(16), params["lanes"]),
                              "index": data.ArrayLayout(unsigned(params["index_bits"]), params["lanes"])})
