"""The registered FP blocks (collected by :mod:`trainforge.hw.registry`)."""
from ..registry import Block
from .adder import FP32Adder
from .multiplier import FPMultiplier

__all__ = ["BLOCKS"]

BLOCKS = (
    Block(
        name="fp_mul",
        component=FPMultiplier,
        testbench="tb_fp_mul",
        summary="FP16 x FP16 or BF16 x BF16 -> exact FP32 multiplier, pipelined (TensorDash's FP MAC)",
        test_params=({}, {"format": "bf16"}, {"format": "fp16", "stages": 1}),
    ),
    Block(
        name="fp32_add",
        component=FP32Adder,
        testbench="tb_fp32_add",
        summary="FP32 adder, round to nearest even, flush to zero, pipelined (TensorDash's FP accumulation)",
        test_params=({}, {"stages": 1}),
        regress_params=({"stages": 7}, {"stages": 2}, {"stages": 3}),
    ),
)
