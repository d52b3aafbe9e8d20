"""Bus/vault words to PE buffer rows: packs elements into rows of k words and closes blocks by count (NeuroTrainer)."""
from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.params import Param, ParamSchema

__all__ = ["NTRowPacker"]


class NTRowPacker(wiring.Component):
    """Turns a word stream (one element per word, END-MARK words in between) into a PE fill stream.

    Exact rules:

    - A row holds ``E`` elements: ``lanes`` in 32-bit mode (``wide = 1``: element ``e`` is
      lane ``e``), ``2 * lanes`` in 16-bit mode (element ``e`` is the low 16 bits of the
      input word, put in half ``e mod 2`` of lane ``e div 2``, the first in the low half),
      the compiler's packing (``sim/neurotrainer/executor.py``). The row is shifted in from
      the top, so after ``E`` elements every bit has been replaced.
    - Words with ``end = 1`` (END-MARKs) are consumed and dropped: a PE block does not
      follow the vault programs (one program may fill many blocks), so blocks are counted:
      the row that completes ``block`` rows since the last ``last`` gets ``last = 1``.
    - One output register: a word is taken when the register is empty or being emptied,
      so one row per cycle at ``E = 1``. ``wide`` and ``block`` must be held while words flow.

    Parameters
    ----------
    lanes : int
        Lanes of the row (BUF Input 2: the PE's k; BUF Input 1: 1).

    Members
    -------
    i_word : In(stream.Signature(word_layout))
    o_row : Out(stream.Signature(row_layout))
    wide : In(1)
        32-bit elements (else 16-bit, two per word).
    block : In(16)
        Rows per block (1..65535; 0 is taken as 65536).

    Attributes
    ----------
    word_layout : data.StructLayout
        ``data`` (32), ``end``.
    row_layout : data.StructLayout
        ``data`` (``lanes`` x 32), ``last``: the PE's fill layout.
    """

    PARAMS = ParamSchema((
        Param("lanes", int, 4, "32-bit words per row", minimum=1, maximum=64),
    ))

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.word_layout = data.StructLayout({"data": unsigned(32), "end": 1})
        self.row_layout = data.StructLayout({"data": data.ArrayLayout(unsigned(32), self.lanes), "last": 1})
        super().__init__({
            "i_word": In(stream.Signature(self.word_layout)),
            "o_row": Out(stream.Signature(self.row_layout)),
            "wide": In(1),
            "block": In(16),
        })

    def elaborate(self, platform):
        m = Module()
        width = 32 * self.lanes
        assembly = Signal(width)
        element = Signal(range(2 * self.lanes + 1))
        rows = Signal(16)
        full = Signal()
        last = Signal()
        word, row = self.i_word, self.o_row
        elements = Mux(self.wide, self.lanes, 2 * self.lanes)
        m.d.comb += [
            row.valid.eq(full),
            row.payload.data.eq(assembly),
            row.payload.last.eq(last),
            word.ready.eq(~full | row.ready),
        ]
        with m.If(row.valid & row.ready):
            m.d.sync += full.eq(0)
        with m.If(word.valid & word.ready & ~word.payload.end):
            shifted = Mux(self.wide, Cat(assembly[32:], word.payload.data),
                          Cat(assembly[16:], word.payload.data[:16]))
            m.d.sync += assembly.eq(shifted)
            with m.If(element == elements - 1):
                closes = (rows + 1)[:16] == self.block
                m.d.sync += [element.eq(0), full.eq(1), last.eq(closes), rows.eq(Mux(closes, 0, rows + 1))]
            with m.Else():
                m.d.sync += element.eq(element + 1)
        return m
