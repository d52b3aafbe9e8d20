"""What the dense baseline PE's generator and golden model share (TensorDash, Fig. 2).

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``width``, ``acc_width``, ``signed``.
"""
from amaranth import signed as signed_shape, unsigned
from amaranth.lib import data

from .params import Param, ParamSchema

__all__ = ["PARAMS", "LATENCY", "operand_shape", "product_shape", "result_shape", "row_layout"]

#: The parameters of ``dense_pe``; the component, golden model, testbench and CLI read them here.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "multiplier lanes L", minimum=1, maximum=64),
    Param("width", int, 8, "operand width in bits", minimum=2, maximum=32),
    Param("acc_width", int, 32, "accumulator width in bits (wraps around)", minimum=2, maximum=64),
    Param("signed", bool, True, "two's complement operands and accumulator"),
))

#: Cycles from the acceptance of a ``read`` row to its result on ``o_sum``, without stalls.
LATENCY = 2


def _shape(width, is_signed):
    return signed_shape(width) if is_signed else unsigned(width)


def operand_shape(params):
    """Shape of one operand ``a[k]`` or ``b[k]``."""
    return _shape(params["width"], params["signed"])


def product_shape(params):
    """Shape of one lane's exact product."""
    return _shape(2 * params["width"], params["signed"])


def result_shape(params):
    """Shape of the accumulator and of ``o_sum``'s payload."""
    return _shape(params["acc_width"], params["signed"])


def row_layout(params):
    """Payload of ``i_row``: ``a`` and ``b`` arrays of ``lanes`` operands, then the ``clear`` and ``read`` flags."""
    return data.StructLayout({
        "a": data.ArrayLayout(operand_shape(params), params["lanes"]),
        "b": data.ArrayLayout(operand_shape(params), params["lanes"]),
        "clear": 1,
        "read": 1,
    })
