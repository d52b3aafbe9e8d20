"""The route unit of the PE: max-pooling backward, dY to the argmax of each window (NeuroTrainer, Section 3.3.3)."""
from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.params import Param, ParamSchema
from ..stream_stage import StreamStage

__all__ = ["NTRouter"]


class NTRouter(wiring.Component):
    """Scatters each lane's dY to its window's argmax position, zeros elsewhere.

    The comparator "returns the maximum value and its ID for backpropagation" (Section
    3.3.3); this unit is that backpropagation. Rows arrive with a ``phase``:

    - ``phase = 0``: lane ``i`` keeps ``t_i`` = bits ``16 .. 16 + index_bits - 1`` of its word
      (a MAX result word ``value | index << 16``); the window position restarts at 0;
    - ``phase = 1``: lane ``i`` keeps its word ``v_i`` (dY, 32 bits);
    - ``phase = 2``: one output row, lane ``i`` = ``v_i`` if ``t_i`` equals the position else 0;
      the position steps by one (modulo ``2**index_bits``).

    Only ``phase = 2`` rows make a result, through a
    :class:`~trainforge.hw.stream_stage.StreamStage` (one cycle, :attr:`LATENCY`; ``i_row.ready``
    is a register for them and always 1 for the loading rows).

    Parameters
    ----------
    lanes : int
    index_bits : int
        Width of the argmax index (the comparator's).

    Members
    -------
    i_row : In(stream.Signature(row_layout))
    o_row : Out(stream.Signature(data.ArrayLayout(unsigned(32), lanes)))

    Attributes
    ----------
    row_layout : data.StructLayout
        ``x`` (``lanes`` 32-bit words), ``phase`` (2 bits).
    """

    PARAMS = ParamSchema((
        Param("lanes", int, 4, "lanes (the PE's k)", minimum=1, maximum=64),
        Param("index_bits", int, 8, "argmax index width", minimum=1, maximum=16),
    ))

    #: Cycles from the acceptance of an emitting row to its result on ``o_row``, without stalls.
    LATENCY = 1

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.row_layout = data.StructLayout({"x": data.ArrayLayout(unsigned(32), self.lanes), "phase": 2})
        self.result_layout = data.ArrayLayout(unsigned(32), self.lanes)
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_row": Out(stream.Signature(self.result_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        row = self.i_row.payload
        m.submodules.output_stage = output_stage = StreamStage(self.result_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_row))
        emits = Signal()
        accept = Signal()
        m.d.comb += [
            emits.eq(row.phase == 2),
            output_stage.i_stream.valid.eq(self.i_row.valid & emits),
            self.i_row.ready.eq(~emits | output_stage.i_stream.ready),
            accept.eq(self.i_row.valid & self.i_row.ready),
        ]
        position = Signal(self.index_bits)
        with m.If(accept & (row.phase == 0)):
            m.d.sync += position.eq(0)
        with m.Elif(accept & emits):
            m.d.sync += position.eq(position + 1)
        for lane in range(self.lanes):
            index = Signal(self.index_bits, name=f"index_{lane}")
            value = Signal(32, name=f"value_{lane}")
            with m.If(accept & (row.phase == 0)):
                m.d.sync += index.eq(row.x[lane][16:16 + self.index_bits])
            with m.If(accept & (row.phase == 1)):
                m.d.sync += value.eq(row.x[lane])
            m.d.comb += output_stage.i_stream.payload[lane].eq(Mux(index == position, value, 0))
        return m
