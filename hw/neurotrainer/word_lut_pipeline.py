"""The f(x) / f'(x) look-up tables of a vault controller's read path in three registered stages (NeuroTrainer, Section 3.2)."""
from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import lut as lut_spec
from ...spec.neurotrainer.integration import ACTIVATIONS, LUT_SELECT, WORD_LUT_STAGES
from ...spec.neurotrainer.lut import lut_table
from ...spec.params import Param, ParamSchema
from ..stream_stage import StreamStage

__all__ = ["NTWordLUTPipeline"]


class NTWordLUTPipeline(wiring.Component):
    """:class:`~trainforge.hw.neurotrainer.word_lut.NTWordLUT`'s word rule, one word per cycle, in
    :data:`~trainforge.spec.neurotrainer.integration.WORD_LUT_STAGES` registered stages.

    Same values as the combinational ``NTWordLUT`` (``golden/neurotrainer/lut.py``
    ``nt_lut_words``); each word carries its own table ``select`` and element width ``wide``.
    The stages, each ending in a :class:`~trainforge.hw.stream_stage.StreamStage`:

    1. the element inputs (the saturation of a 32-bit element to 16 bits, the low half or it
       by ``wide``) as offset-binary table positions;
    2. the two breakpoints of each half from the selected table (``T[i]`` and ``T[i+1] - T[i]``)
       and the position ``j`` inside the segment;
    3. the interpolation ``T[i] + floor((T[i+1] - T[i]) j / 2**G)`` of each half and the word
       (unchanged when ``select`` is 0 or 3).

    A vault controller puts it in the vault's read latency (the vault is built that many cycles
    shorter), so the read path's cycles do not change.

    Parameters
    ----------
    activation : str
        ``relu``, ``tanh`` or ``sigmoid`` (f; f' is its derivative).
    table_bits, frac_bits, out_frac_bits : int
        :class:`~trainforge.hw.neurotrainer.lut.NTLUT`'s.

    Members
    -------
    i_word : In(stream.Signature(input_layout))
        ``word`` (32), ``select`` (2: 0 none, 1 f(x), 2 f'(x)), ``wide`` (1).
    o_word : Out(stream.Signature(unsigned(32)))
        The words, :data:`~trainforge.spec.neurotrainer.integration.WORD_LUT_STAGES` cycles later
        without stalls.
    """

    PARAMS = ParamSchema((
        Param("activation", str, "sigmoid", "f(x) of the tables (f'(x) is its derivative)", choices=ACTIVATIONS),
        lut_spec.PARAMS["table_bits"], lut_spec.PARAMS["frac_bits"], lut_spec.PARAMS["out_frac_bits"],
    ))

    #: Cycles from an accepted word to its result, without stalls.
    LATENCY = WORD_LUT_STAGES

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.gap_bits = 16 - self.table_bits
        self.input_layout = data.StructLayout({"word": unsigned(32), "select": unsigned(2), "wide": unsigned(1)})
        self.position_layout = data.StructLayout({
            "word": unsigned(32), "select": unsigned(2), "wide": unsigned(1),
            "offset_low": unsigned(16), "offset_high": unsigned(16)})
        self.breakpoint_layout = data.StructLayout({
            "word": unsigned(32), "select": unsigned(2), "wide": unsigned(1),
            **{f"{field}_{half}": shape for half in ("low", "high")
               for field, shape in (("below", signed(16)), ("difference", signed(17)),
                                    ("position", unsigned(self.gap_bits)))}})
        super().__init__({
            "i_word": In(stream.Signature(self.input_layout)),
            "o_word": Out(stream.Signature(unsigned(32))),
        })

    def elaborate(self, platform):
        m = Module()
        gap_bits = self.gap_bits
        m.submodules.position_stage = position_stage = StreamStage(self.position_layout)
        m.submodules.breakpoint_stage = breakpoint_stage = StreamStage(self.breakpoint_layout)
        m.submodules.word_stage = word_stage = StreamStage(unsigned(32))
        wiring.connect(m, word_stage.o_stream, wiring.flipped(self.o_word))

        # Stage 1: the element inputs as offset-binary table positions.
        word_in = self.i_word.payload
        whole = Signal(signed(32))
        saturated = Signal(signed(16))
        low_input = Signal(signed(16))
        positions = position_stage.i_stream.payload
        m.d.comb += [
            whole.eq(word_in.word.as_signed()),
            saturated.eq(Mux(whole > (1 << 15) - 1, (1 << 15) - 1, Mux(whole < -(1 << 15), -(1 << 15), whole))),
            low_input.eq(Mux(word_in.wide, saturated, word_in.word[:16].as_signed())),
            positions.word.eq(word_in.word),
            positions.select.eq(word_in.select),
            positions.wide.eq(word_in.wide),
            positions.offset_low.eq(low_input.as_unsigned() ^ 0x8000),
            positions.offset_high.eq(word_in.word[16:] ^ 0x8000),
            position_stage.i_stream.valid.eq(self.i_word.valid),
            self.i_word.ready.eq(position_stage.i_stream.ready),
        ]

        # Stage 2: the selected table's breakpoints around each position.
        at = position_stage.o_stream.payload
        points = breakpoint_stage.i_stream.payload
        m.d.comb += [
            points.word.eq(at.word), points.select.eq(at.select), points.wide.eq(at.wide),
            breakpoint_stage.i_stream.valid.eq(position_stage.o_stream.valid),
            position_stage.o_stream.ready.eq(breakpoint_stage.i_stream.ready),
        ]
        tables = {select: lut_table(self.activation if key == "f" else f"{self.activation}_grad", self.table_bits,
                                    self.frac_bits, self.out_frac_bits) for key, select in LUT_SELECT.items()}
        for half in ("low", "high"):
            offset = getattr(at, f"offset_{half}")
            below = {}
            above = {}
            for select, table in tables.items():
                rom = Memory(shape=signed(16), depth=len(table), init=[int(v) for v in table])
                m.submodules[f"table{select}_{half}"] = rom
                below_port, above_port = rom.read_port(domain="comb"), rom.read_port(domain="comb")
                m.d.comb += [below_port.addr.eq(offset[gap_bits:]), above_port.addr.eq(offset[gap_bits:] + 1)]
                below[select], above[select] = below_port.data, above_port.data
            second = LUT_SELECT["df"]
            chosen_below = Signal(signed(16), name=f"below_{half}")
            chosen_above = Signal(signed(16), name=f"above_{half}")
            m.d.comb += [
                chosen_below.eq(Mux(at.select == second, below[second], below[LUT_SELECT["f"]])),
                chosen_above.eq(Mux(at.select == second, above[second], above[LUT_SELECT["f"]])),
                getattr(points, f"below_{half}").eq(chosen_below),
                getattr(points, f"difference_{half}").eq(chosen_above - chosen_below),
                getattr(points, f"position_{half}").eq(offset[:gap_bits]),
            ]

        # Stage 3: the interpolation of each half and the word.
        got = breakpoint_stage.o_stream.payload
        values = {}
        for half in ("low", "high"):
            value = Signal(signed(16), name=f"value_{half}")
            m.d.comb += value.eq(getattr(got, f"below_{half}")
                                 + ((getattr(got, f"difference_{half}") * getattr(got, f"position_{half}")) >> gap_bits))
            values[half] = value
        looked_up = Signal(unsigned(32))
        m.d.comb += [
            looked_up.eq(Mux(got.wide, values["low"].as_signed(),
                             values["low"].as_unsigned() | (values["high"].as_unsigned() << 16))),
            word_stage.i_stream.payload.eq(Mux((got.select == LUT_SELECT["f"]) | (got.select == LUT_SELECT["df"]),
                                                looked_up, got.word)),
            word_stage.i_stream.valid.eq(breakpoint_stage.o_stream.valid),
            breakpoint_stage.o_stream.ready.eq(word_stage.i_stream.ready),
        ]
        return m
