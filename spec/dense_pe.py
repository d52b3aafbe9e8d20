"""What the dense baseline PE's generator and golden model share (TensorDash, Fig. 2).

Parameters
----------
See :data:`PARAMS`: ``lanes``, ``width``, ``acc_width``, ``signed`` and
``mac``, the MAC unit (:mod:`trainforge.spec.mac`). With ``mac="fp16"`` or
``"bf16"`` the operands are 16-bit FP16 / bfloat16 bit patterns and the
accumulator and results are FP32 bit patterns; ``width``, ``acc_width`` and
``signed`` are then ignored.
"""
from amaranth.lib import data

from . import mac
from .params import Param, ParamSchema

__all__ = ["PARAMS", "latency", "operand_shape", "product_shape", "result_shape", "row_layout"]

#: The parameters of ``dense_pe``; the component, golden model, testbench and CLI read them here.
PARAMS = ParamSchema((
    Param("lanes", int, 4, "multiplier lanes L", minimum=1, maximum=64),
    Param("width", int, 8, "operand width in bits", minimum=2, maximum=32),
    Param("acc_width", int, 32, "accumulator width in bits (wraps around)", minimum=2, maximum=64),
    Param("signed", bool, True, "two's complement operands and accumulator"),
    mac.MAC,
    mac.PARTIAL_SUMS,
))


def latency(params):
    """Cycles from the acceptance of a ``read`` row to its result on ``o_sum``, without stalls.

    The operand register, the multiplier's, the lane reduction's and the
    accumulator's register stages (:func:`trainforge.spec.mac.multiply_stages`,
    :func:`~trainforge.spec.mac.tree_stages`,
    :func:`~trainforge.spec.mac.accumulate_stages`), then the output stream
    stage: 5 for ``integer``; for the FP units
    ``1 + 2 + 4 * ceil(log2(lanes)) + 13 + 1`` (25 at 4 lanes).
    """
    return 1 + mac.multiply_stages(params) + mac.tree_stages(params) + mac.accumulate_stages(params) + 1


def operand_shape(params):
    """Shape of one operand ``a[k]`` or ``b[k]`` (:func:`trainforge.spec.mac.operand_shape`)."""
    return mac.operand_shape(params)


def product_shape(params):
    """Shape of one lane's product (:func:`trainforge.spec.mac.product_shape`)."""
    return mac.product_shape(params)


def result_shape(params):
    """Shape of the accumulator and of ``o_sum``'s payload (:func:`trainforge.spec.mac.result_shape`)."""
    return mac.result_shape(params)


def row_layout(params):
    """Payload of ``i_row``: ``a`` and ``b`` arrays of ``lanes`` operands, then the ``clear`` and ``read`` flags."""
    return data.StructLayout({
        "a": data.ArrayLayout(operand_shape(params), params["lanes"]),
        "b": data.ArrayLayout(operand_shape(params), params["lanes"]),
        "clear": 1,
        "read": 1,
    })
