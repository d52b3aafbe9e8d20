"""What the standalone FP blocks ``fp_mul`` and ``fp32_add`` share with their testbenches.

The blocks wrap the multiplier and the adder of :mod:`trainforge.hw.fp`
between an operand register and the shared stream stage, so that the
arithmetic can be simulated and measured on its own.

Parameters
----------
``fp_mul``: ``format`` (``fp16`` or ``bf16``) and ``stages`` (:data:`MUL_PARAMS`);
``fp32_add``: ``stages`` (:data:`ADD_PARAMS`).
"""
from amaranth import unsigned
from amaranth.lib import data

from .fp import FP32
from .mac import FLOAT_FORMATS, FP32_ADD_STAGES, MULTIPLY_STAGES
from .params import Param, ParamSchema

__all__ = ["MUL_PARAMS", "ADD_PARAMS", "latency", "mul_operands_layout", "add_operands_layout", "RESULT_SHAPE"]

#: The parameters of the ``fp_mul`` block.
MUL_PARAMS = ParamSchema((
    Param("format", str, "fp16", "operand format: IEEE half or bfloat16", choices=tuple(FLOAT_FORMATS)),
    Param("stages", int, MULTIPLY_STAGES["fp16"], "register stages of the multiplier (the last holds the product)",
          minimum=1, maximum=2),
))

#: The parameters of the ``fp32_add`` block.
ADD_PARAMS = ParamSchema((
    Param("stages", int, FP32_ADD_STAGES, "register stages of the adder (the last holds the sum)",
          minimum=1, maximum=7),
))

#: Shape of the result of both blocks: FP32 bits.
RESULT_SHAPE = unsigned(FP32.width)


def latency(params):
    """Cycles from an operand pair's transfer to its result on the output: operand register, stages, stream stage."""
    return 1 + params["stages"] + 1


def mul_operands_layout(params):
    """Payload of ``fp_mul``'s input: two operands of the format's 16 bits."""
    width = FLOAT_FORMATS[params["format"]].width
    return data.StructLayout({"a": unsigned(width), "b": unsigned(width)})


def add_operands_layout(params):
    """Payload of ``fp32_add``'s input: two FP32 operands."""
    return data.StructLayout({"a": RESULT_SHAPE, "b": RESULT_SHAPE})
