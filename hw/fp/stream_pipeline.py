"""A stream around a clock-enabled datapath: operand register, the datapath's stages, the shared stream stage."""
from amaranth import Signal
from amaranth.lib import wiring

from ..stream_stage import StreamStage
from .stages import register_values

__all__ = ["stream_pipeline"]


def stream_pipeline(m, i_stream, o_stream, result_shape, datapath, stages):
    """Drive ``o_stream`` with ``datapath`` applied to every transaction of ``i_stream``, full rate, stalling as one.

    The whole pipeline has one clock enable, ``~last_valid | stage_ready``:
    the valid bit of the last register and the output stream stage's
    registered ready. So ``i_stream.ready`` (the enable) has no combinational
    path from ``o_stream.ready``.

    Parameters
    ----------
    m : Module
    i_stream : stream interface (the component's inward port)
        Its payload is a struct whose fields are the datapath's operands.
    o_stream : stream interface (the component's outward port)
    result_shape : shape-castable
        Payload shape of ``o_stream``.
    datapath : callable
        ``datapath(m, operands, enable) -> Value``: adds the logic with
        ``stages`` clock-enabled register stages, the last holding the result.
    stages : int
        Register stages of ``datapath``.
    """
    m.submodules.output_stage = output_stage = StreamStage(result_shape)
    wiring.connect(m, output_stage.o_stream, wiring.flipped(o_stream))
    valid = [Signal(name=f"valid_{index}") for index in range(stages + 1)]
    enable = Signal()
    m.d.comb += [
        enable.eq(~valid[-1] | output_stage.i_stream.ready),
        i_stream.ready.eq(enable),
    ]
    with m.If(enable):
        m.d.sync += valid[0].eq(i_stream.valid)
        m.d.sync += [later.eq(earlier) for earlier, later in zip(valid, valid[1:])]
    payload = i_stream.payload
    operands = register_values(m, {name: getattr(payload, name) for name, _ in payload.shape()}, enable, "operand")
    result = datapath(m, operands, enable)
    m.d.comb += [
        output_stage.i_stream.payload.eq(result),
        output_stage.i_stream.valid.eq(valid[-1]),
    ]
