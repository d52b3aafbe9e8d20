"""PE result rows to vault/bus words, one lane per word, with an END-MARK after every write program (NeuroTrainer)."""
from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.params import Param, ParamSchema
from ...spec.neurotrainer.pmag import end_mark

__all__ = ["NTRowUnpacker"]


class NTRowUnpacker(wiring.Component):
    """Splits the PE's result rows into the words its write program stores.

    Exact rules:

    - A row of ``lanes`` 32-bit words gives ``lanes`` words, lane 0 first, in both modes: in
      16-bit mode (``wide = 0``) a lane's word holds its two 16-bit results as they are, the
      first in the low half (``spec/neurotrainer/packing.py``).
    - After every ``rows`` rows (one write program's worth) one END-MARK word follows
      (``end = 1``, data 0xFFFFFFFF or 0xFFFF by ``wide``): it closes the write program on the
      vault controller and releases the bus after a merge burst. The row's ``last`` flag is
      not used (a pass is not a write program).
    - One row register; a row is taken when the register is empty or its last word is
      leaving without an END-MARK to follow, so one word per cycle. ``wide`` (the END-MARK's
      value) and ``rows`` must be held while rows flow.

    Parameters
    ----------
    lanes : int

    Members
    -------
    i_row : In(stream.Signature(row_layout))
        The PE's ``o_result``.
    o_word : Out(stream.Signature(word_layout))
    wide : In(1)
    rows : In(16)
        Rows per write program (1..65535; 0 is taken as 65536).

    Attributes
    ----------
    row_layout : data.StructLayout
        ``y`` (``lanes`` x 32), ``last``: the PE's result layout.
    word_layout : data.StructLayout
        ``data`` (32), ``end``.
    """

    PARAMS = ParamSchema((
        Param("lanes", int, 4, "32-bit words per result row", minimum=1, maximum=64),
    ))

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.row_layout = data.StructLayout({"y": data.ArrayLayout(unsigned(32), self.lanes), "last": 1})
        self.word_layout = data.StructLayout({"data": unsigned(32), "end": 1})
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_word": Out(stream.Signature(self.word_layout)),
            "wide": In(1),
            "rows": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        held = Signal(32 * self.lanes)
        holding = Signal()
        element = Signal(range(self.lanes + 1))
        rows = Signal(16)
        mark = Signal()
        row, word = self.i_row, self.o_word
        final = Signal()          # the held row's last word
        closes = Signal()         # ... and it completes a write program
        sent = Signal()
        m.d.comb += [
            final.eq(element == self.lanes - 1),
            closes.eq((rows + 1)[:16] == self.rows),
            word.valid.eq(holding | mark),
            word.payload.end.eq(mark),
            word.payload.data.eq(Mux(mark, Mux(self.wide, end_mark(True), end_mark(False)),
                                     held[:32])),
            sent.eq(word.valid & word.ready),
            row.ready.eq(~mark & (~holding | (sent & final & ~closes))),
        ]
        with m.If(sent & mark):
            m.d.sync += mark.eq(0)
        with m.Elif(sent):
            m.d.sync += held.eq(held >> 32)
            with m.If(final):
                m.d.sync += [holding.eq(0), element.eq(0), rows.eq(Mux(closes, 0, rows + 1)), mark.eq(closes)]
            with m.Else():
                m.d.sync += element.eq(element + 1)
        with m.If(row.valid & row.ready):
            m.d.sync += [held.eq(row.payload.y), holding.eq(1)]
        return m
