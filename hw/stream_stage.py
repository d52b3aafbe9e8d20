"""The one registered pipeline stage for ``amaranth.lib.stream`` interfaces (a skid buffer)."""
from amaranth import Module, Shape, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..spec import stream_stage as spec

__all__ = ["StreamStage"]


class StreamStage(wiring.Component):
    """A stream register slice: full throughput, ``ready`` registered, and no combinational path through it.

    The output payload and valid come from a register (:attr:`~spec.LATENCY`
    is one cycle). ``i_stream.ready`` is a register too: it is low only while
    the skid register holds a transaction, so no combinational path runs from
    ``o_stream.ready`` to ``i_stream.ready`` nor from ``i_stream`` to
    ``o_stream``. When the consumer stalls while a transaction is arriving,
    that transaction waits in the skid register, so the stage still accepts
    one transaction every cycle while the consumer takes one every cycle. The
    stage keeps the stream rules: once valid, the output holds its payload
    until it is taken, and transactions leave in the order they came, each once.

    Only the two valid bits are reset; the payload registers have no reset
    (they are never read while invalid), which keeps them free of reset logic
    on an FPGA. A reset drops what the stage holds.

    Parameters
    ----------
    payload_shape : shape-castable, optional
        Shape or ``lib.data`` layout of the payload. Blocks that pipeline their
        streams pass their own payload's shape here.
    width : int
        Payload width when ``payload_shape`` is not given: the registered
        ``stream_stage`` block's one parameter (:data:`trainforge.spec.stream_stage.PARAMS`).

    Members
    -------
    i_stream : In(stream.Signature(payload_shape))
        Transactions in.
    o_stream : Out(stream.Signature(payload_shape))
        The same transactions, in order, one cycle later at the earliest.
    """

    PARAMS = spec.PARAMS
    LATENCY = spec.LATENCY

    def __init__(self, payload_shape=None, *, width=spec.PARAMS["width"].default):
        self.params = self.PARAMS.resolve(width=width)
        if payload_shape is None:
            payload_shape = unsigned(width)
        else:
            Shape.cast(payload_shape)  # raises TypeError naming the bad shape
        self.payload_shape = payload_shape
        super().__init__({
            "i_stream": In(stream.Signature(payload_shape)),
            "o_stream": Out(stream.Signature(payload_shape)),
        })

    def elaborate(self, platform):
        m = Module()

        skid_valid = Signal()
        skid_payload = Signal(self.payload_shape, reset_less=True)
        output_payload = Signal(self.payload_shape, reset_less=True)
        output_valid = Signal()
        m.d.comb += [
            self.i_stream.ready.eq(~skid_valid),
            self.o_stream.valid.eq(output_valid),
            self.o_stream.payload.eq(output_payload),
        ]

        output_free = ~output_valid | self.o_stream.ready
        with m.If(skid_valid):
            # The input is stalled; the skid register moves to the output once that is free.
            with m.If(self.o_stream.ready):
                m.d.sync += [output_payload.eq(skid_payload), skid_valid.eq(0)]
        with m.Elif(self.i_stream.valid):
            with m.If(output_free):
                m.d.sync += [output_payload.eq(self.i_stream.payload), output_valid.eq(1)]
            with m.Else():
                m.d.sync += [skid_payload.eq(self.i_stream.payload), skid_valid.eq(1)]
        with m.Elif(self.o_stream.ready):
            m.d.sync += output_valid.eq(0)

        return m
