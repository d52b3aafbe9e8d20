"""What the vault memory model's generator and golden model share: parameters.

Parameters
----------
See :data:`PARAMS`: ``depth``, ``latency``, ``interval``.
"""
from amaranth import unsigned
from amaranth.lib import data

from ...errors import ParameterError
from ..params import Param, ParamSchema

__all__ = ["PARAMS", "request_layout"]


#: The parameters of ``nt_vault``.
PARAMS = ParamSchema((
    Param("depth", int, 1024, "words of storage (power of two)",
          minimum=2, maximum=1 << 16, power_of_two=True),
    Param("latency", int, 4, "read latency in cycles", minimum=1, maximum=64),
    Param("interval", int, 1, "minimum cycles between accepted requests (bandwidth = 4 B / interval)",
          minimum=1, maximum=16),
))


def request_layout(params):
    """Payload of ``i_request``: ``address`` (32 bits), ``write``, ``data`` (32 bits)."""
    return data.StructLayout({"address": unsigned(32), "write": 1, "data": unsigned(32)})
