"""What the comparator unit's generator and golden model share: parameters and latency.

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``index_bits``.
"""
from ..params import Param, ParamSchema

__all__ = ["PARAMS", "LATENCY"]

#: The parameters of ``nt_comparator``.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "comparators k", minimum=1, maximum=64),
    Param("index_bits", int, 8, "argmax index width (window of up to 2**index_bits elements)",
          minimum=1, maximum=16),
))

#: Cycles from the acceptance of a ``last`` row to its result on ``o_max``, without stalls.
LATENCY = 1
