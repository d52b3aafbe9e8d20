"""The f(x) / f'(x) look-up tables on a vault controller's read path, one 32-bit word per cycle (NeuroTrainer, Section 3.2)."""
from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import lut as lut_spec
from ...spec.neurotrainer.integration import ACTIVATIONS, LUT_SELECT
from ...spec.neurotrainer.lut import lut_table
from ...spec.params import Param, ParamSchema

__all__ = ["NTWordLUT"]


class NTWordLUT(wiring.Component):
    """f(x) and f'(x) of the elements of a vault word, combinationally (same cycle).

    The PMAG "computes the non-linear function (and its derivative) by using look up tables"
    (Section 3.2); here the tables sit on the vault controller's read path, between the
    vault's read data and the read stream, so a layer's operands reach the PEs as f(x)
    (forward) or f'(x) (backward). The arithmetic is :class:`~trainforge.hw.neurotrainer.lut.NTLUT`'s
    rule (``spec/neurotrainer/lut.py``: offset-binary segment and position, two breakpoints,
    ``T[i] + floor((T[i+1] - T[i]) j / 2**G)``) without its two registers, so the read
    path's cycles do not change. Word rule (``golden/neurotrainer/lut.py`` ``nt_lut_words``):

    - ``select = 0``: the word passes unchanged; ``1``: f(x); ``2``: f'(x) (``<activation>_grad``).
    - ``wide = 1``: one element, saturated to signed 16 bits before the table, its result
      sign-extended to 32 bits. ``wide = 0``: two 16-bit elements, each half through its
      own table read, the results in the same halves.

    Parameters
    ----------
    activation : str
        ``relu``, ``tanh`` or ``sigmoid`` (f; f' is its derivative).
    table_bits, frac_bits, out_frac_bits : int
        :class:`~trainforge.hw.neurotrainer.lut.NTLUT`'s.

    Members
    -------
    i_word : In(32)
    wide : In(1)
    select : In(2)
    o_word : Out(32)
    """

    PARAMS = ParamSchema((
        Param("activation", str, "sigmoid", "f(x) of the tables (f'(x) is its derivative)", choices=ACTIVATIONS),
        lut_spec.PARAMS["table_bits"], lut_spec.PARAMS["frac_bits"], lut_spec.PARAMS["out_frac_bits"],
    ))

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        super().__init__({"i_word": In(32), "wide": In(1), "select": In(2), "o_word": Out(32)})

    def _lookup(self, m, name, table, x):
        """The interpolated table value at the signed 16-bit ``x`` (two combinational reads of one ROM)."""
        gap_bits = 16 - self.table_bits
        m.submodules[name] = rom = Memory(shape=signed(16), depth=len(table), init=[int(v) for v in table])
        low_port, high_port = rom.read_port(domain="comb"), rom.read_port(domain="comb")
        offset = Signal(16, name=f"{name}_offset")
        difference = Signal(signed(17), name=f"{name}_difference")
        value = Signal(signed(16), name=f"{name}_value")
        m.d.comb += [
            offset.eq(x.as_unsigned() ^ 0x8000),
            low_port.addr.eq(offset[gap_bits:]),
            high_port.addr.eq(offset[gap_bits:] + 1),
            difference.eq(high_port.data - low_port.data),
            value.eq(low_port.data + ((difference * offset[:gap_bits]) >> gap_bits)),
        ]
        return value

    def elaborate(self, platform):
        m = Module()
        tables = {select: lut_table(self.activation if key == "f" else f"{self.activation}_grad", self.table_bits,
                                    self.frac_bits, self.out_frac_bits) for key, select in LUT_SELECT.items()}
        word = self.i_word
        whole = Signal(signed(32))
        saturated = Signal(signed(16))
        m.d.comb += [
            whole.eq(word.as_signed()),
            saturated.eq(Mux(whole > (1 << 15) - 1, (1 << 15) - 1, Mux(whole < -(1 << 15), -(1 << 15), whole))),
        ]
        low_input = Signal(signed(16))
        m.d.comb += low_input.eq(Mux(self.wide, saturated, word[:16].as_signed()))
        results = {}
        for select, table in tables.items():
            low = self._lookup(m, f"table{select}_low", table, low_input)
            high = self._lookup(m, f"table{select}_high", table, word[16:].as_signed())
            result = Signal(unsigned(32), name=f"result{select}")
            m.d.comb += result.eq(Mux(self.wide, low.as_signed(), low.as_unsigned() | (high.as_unsigned() << 16)))
            results[select] = result
        with m.Switch(self.select):
            for select, result in results.items():
                with m.Case(select):
                    m.d.comb += self.o_word.eq(result)
            with m.Default():
                m.d.comb += self.o_word.eq(word)
        return m
