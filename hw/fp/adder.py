"""The registered ``fp32_add`` block: the FP32 adder between a stream input and a stream output."""
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import fp_units as spec
from .add import fp32_add
from .stream_pipeline import stream_pipeline

__all__ = ["FP32Adder"]


class FP32Adder(wiring.Component):
    """FP32 + FP32 -> FP32 (round to nearest even, flush to zero), one operand pair per cycle.

    Operand register, the adder's ``stages`` register stages
    (:func:`trainforge.hw.fp.add.fp32_add`), then the shared stream stage: a
    sum leaves ``stages + 2`` cycles after its operands were accepted
    (:func:`trainforge.spec.fp_units.latency`). With ``stages=1`` the whole
    adder lies between two registers (the measure of a one-cycle accumulation loop).

    Parameters
    ----------
    stages : int
        Register stages of the adder (1 to 7).

    Members
    -------
    i_operands : In(stream.Signature(operands_layout))
        FP32 operand pairs ``a``, ``b``.
    o_sum : Out(stream.Signature(unsigned(32)))
        FP32 sums.
    """

    PARAMS = spec.ADD_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.operands_layout = spec.add_operands_layout(self.params)
        super().__init__({
            "i_operands": In(stream.Signature(self.operands_layout)),
            "o_sum": Out(stream.Signature(spec.RESULT_SHAPE)),
        })

    def elaborate(self, platform):
        m = Module()

        def datapath(m, operands, enable):
            return fp32_add(m, operands["a"], operands["b"], self.stages, enable)

        stream_pipeline(m, self.i_operands, self.o_sum, spec.RESULT_SHAPE, datapath, self.stages)
        return m
