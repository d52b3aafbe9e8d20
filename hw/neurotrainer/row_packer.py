"""Bus/vault words to PE buffer rows: packs words into rows of k words and closes blocks by count (NeuroTrainer)."""
from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...errors import ParameterError
from ...spec.params import Param, ParamSchema
from ...spec.neurotrainer.packing import FIRST_HALF

__all__ = ["NTRowPacker"]


def _check_splat(values):
    """A splatting packer fills BUF Input 1: one word per row."""
    if values["splat"] and values["lanes"] != 1:
        raise ParameterError(f"parameter 'lanes' = {values['lanes']} is invalid with splat = True; allowed: 1 "
                             "(a BUF Input 1 row is one word)")


class NTRowPacker(wiring.Component):
    """Turns a word stream (END-MARK words in between) into a PE fill stream.

    The word format is ``spec/neurotrainer/packing.py``'s: in 16-bit layers a word holds two
    16-bit elements, the first in the low half. Exact rules:

    - A row is ``lanes`` words, word ``e`` in lane ``e``, in both modes (a 16-bit word is a
      lane's two elements as they are). The row is shifted in from the top, so after
      ``lanes`` words every bit has been replaced.
    - ``splat`` (the BUF Input 1 packer, ``lanes = 1``) in 16-bit mode (``wide = 0``): each
      16-bit half of a word, the low half first, becomes one row ``e | e << 16`` (the scalar
      of ``y = a x + y`` in both halves of the MAC lane). When the low half's row closes a
      block, the high half is padding (a block of an odd number of elements) and is dropped.
    - Words with ``end = 1`` (END-MARKs) are consumed and dropped: a PE block does not
      follow the vault programs (one program may fill many blocks), so blocks are counted:
      the row that completes ``block`` rows since the last ``last`` gets ``last = 1``.
    - One output register: a word is taken when the register is empty or being emptied
      (and, splatting, no high half is waiting), so one row per cycle. ``wide`` and
      ``block`` must be held while words flow.

    Parameters
    ----------
    lanes : int
        Lanes of the row (BUF Input 2: the PE's k; BUF Input 1: 1).
    splat : bool
        Split 16-bit words into one row per half (BUF Input 1).

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
        Param("splat", bool, False, "one row per 16-bit half, copied to both halves (BUF Input 1)"),
    ), constraints=(_check_splat,))

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
        assembly = Signal(32 * self.lanes)
        element = Signal(range(self.lanes + 1))
        rows = Signal(16)
        full = Signal()
        last = Signal()
        word, row = self.i_word, self.o_row
        room = Signal()
        m.d.comb += [
            row.valid.eq(full),
            row.payload.data.eq(assembly),
            row.payload.last.eq(last),
            room.eq(~full | row.ready),
        ]
        with m.If(row.valid & row.ready):
            m.d.sync += full.eq(0)
        # rows + 1 == block (mod 2**16), written as rows == block - 1: YoWASP Yosys 0.70's ABC9 reintegration
        # aborts on the first form at lanes = 2 (an assertion in rtlil.cc, so nt_system did not synthesize);
        # the two forms are proven equivalent (Yosys equiv_induct, lanes 1-4, splat too).
        closes = rows == (self.block - 1)[:16]

        def emit():
            m.d.sync += [full.eq(1), last.eq(closes), rows.eq(Mux(closes, 0, rows + 1))]

        if self.splat:
            pending = Signal()                  # the second half of the last word, waiting for its row
            second = Signal(16)
            first_half = word.payload.data.word_select(FIRST_HALF, 16)
            other_half = word.payload.data.word_select(1 - FIRST_HALF, 16)
            m.d.comb += word.ready.eq(room & ~pending)
            with m.If(pending & room):
                m.d.sync += [assembly.eq(Cat(second, second)), pending.eq(0)]
                emit()
            with m.Elif(word.valid & word.ready & ~word.payload.end):
                m.d.sync += assembly.eq(Mux(self.wide, word.payload.data, Cat(first_half, first_half)))
                m.d.sync += [second.eq(other_half), pending.eq(~self.wide & ~closes)]
                emit()
        else:
            m.d.comb += word.ready.eq(room)
            with m.If(word.valid & word.ready & ~word.payload.end):
                m.d.sync += assembly.eq(Cat(assembly[32:], word.payload.data))
                with m.If(element == self.lanes - 1):
                    m.d.sync += element.eq(0)
                    emit()
                with m.Else():
                    m.d.sync += element.eq(element + 1)
        return m
