"""The registered ``fp_mul`` block: the FP16/BF16 multiplier between a stream input and a stream output."""
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import fp_units as spec
from ...spec.mac import FLOAT_FORMATS
from .multiply import fp_multiply
from .stream_pipeline import stream_pipeline

__all__ = ["FPMultiplier"]


class FPMultiplier(wiring.Component):
    """FP16 x FP16 (or BF16 x BF16) -> exact FP32 product, one operand pair per cycle.

    Operand register, the multiplier's ``stages`` register stages
    (:func:`trainforge.hw.fp.multiply.fp_multiply`), then the shared stream
    stage: a product leaves ``stages + 2`` cycles after its operands were
    accepted (:func:`trainforge.spec.fp_units.latency`). The pipeline stalls
    as one on a clock enable made of registers only.

    Parameters
    ----------
    format : str
        ``"fp16"`` or ``"bf16"``.
    stages : int
        Register stages of the multiplier (1 or 2).

    Members
    -------
    i_operands : In(stream.Signature(operands_layout))
        Operand pairs ``a``, ``b`` (bit patterns of the format).
    o_product : Out(stream.Signature(unsigned(32)))
        FP32 products.
    """

    PARAMS = spec.MUL_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.fmt = FLOAT_FORMATS[self.format]
        self.operands_layout = spec.mul_operands_layout(self.params)
        super().__init__({
            "i_operands": In(stream.Signature(self.operands_layout)),
            "o_product": Out(stream.Signature(spec.RESULT_SHAPE)),
        })

    def elaborate(self, platform):
        m = Module()

        def datapath(m, operands, enable):
            return fp_multiply(m, operands["a"], operands["b"], self.fmt, self.stages, enable)

        stream_pipeline(m, self.i_operands, self.o_product, spec.RESULT_SHAPE, datapath, self.stages)
        return m
