"""What the bus's generator and golden model share: parameters and latency.

Parameters
----------
See :data:`PARAMS`: ``pes``, ``width``.
"""
from amaranth import unsigned
from amaranth.lib import data

from ...errors import ParameterError
from ..params import Param, ParamSchema

__all__ = ["PARAMS", "LATENCY", "check_width", "word_layout", "merge_layout"]


def check_width(values):
    """Schema constraint: a word is 16 or 32 bits."""
    if values["width"] not in (16, 32):
        raise ParameterError(f"parameter 'width' = {values['width']!r} is invalid; allowed: 16 or 32")


#: The parameters of ``nt_bus``.
PARAMS = ParamSchema((
    Param("pes", int, 4, "number of PEs on the bus", minimum=2, maximum=16),
    Param("width", int, 32, "data width of a word (16 or 32)", minimum=16, maximum=32),
), constraints=(check_width,))

#: Pipeline stages between the bus input and its outputs (Sec. 3.4: "4 stage pipelined BUS").
LATENCY = 4


def word_layout(params):
    """A word on the bus: ``data`` (``width`` bits) and ``end`` (the END-MARK flag)."""
    return data.StructLayout({"data": unsigned(params["width"]), "end": 1})


def merge_layout(params):
    """A merged word to the common vault: ``data``, ``end`` and ``source`` (the sending PE)."""
    return data.StructLayout({"data": unsigned(params["width"]), "end": 1, "source": range(params["pes"])})
