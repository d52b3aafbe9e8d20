"""What the stream pipeline stage's generator and golden model share.

Parameters
----------
See :data:`PARAMS`: ``width``, the payload width of the registered block
(inside other blocks the stage takes any payload shape).
"""
from .params import Param, ParamSchema

__all__ = ["PARAMS", "LATENCY", "CAPACITY"]

#: The parameters of the registered ``stream_stage`` block.
PARAMS = ParamSchema((
    Param("width", int, 8, "payload width in bits of the registered block", minimum=1, maximum=1024),
))

#: Cycles from a transfer into the stage to the same payload on its output, when the output is ready.
LATENCY = 1

#: Transactions the stage holds at most: the output register and the skid register.
CAPACITY = 2
