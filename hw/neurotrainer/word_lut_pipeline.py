"""The f(x) / f'(x) look-up tables of a vault controller's read path in three registered stages (NeuroTrainer, Section 3.2)."""
from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import lut as lut_spec
from ...spec.neurotrainer.integration import ACTIVATIONS, LUT_SELECT, WORD_LUT_STAGES
from ...spec.neurotrainer.lut import lut_table
from ...spec.params import Param, ParamSchema
from ..registered_multiplier import RegisteredMultiplier
from ..stream_stage import StreamStage

__all__ = ["NTWordLUTPipeline"]


class NTWordLUTPipeline(wiring.Component):
    """:class:`~trainforge.hw.neurotrainer.word_lut.NTWordLUT`'s word rule, one word per cycle, in
    :data:`~trainforge.spec.neurotrainer.integration.WORD_LUT_STAGES` registered stages.

    Same values as the combinational ``NTWordLUT`` (``golden/neurotrainer/lut.py``
    ``nt_lut_words``); each word carries its own table ``select`` and element width ``wide``.
    The stages:

    1. the element inputs (the saturation of a 32-bit element to 16 bits, the low half or it
       by ``wide``) as offset-binary table positions, into a
       :class:`~trainforge.hw.stream_stage.StreamStage`;
    2. the breakpoint ``T[i]`` of each half from the selected table, into a ``StreamStage`` with the
       word; the difference ``T[i+1] - T[i]`` (a table of differences beside the table, built from
       it) and the position ``j`` inside the segment into the operand registers of a
       :class:`~trainforge.hw.registered_multiplier.RegisteredMultiplier` per half;
    3. the product ``(T[i+1] - T[i]) j`` in the multiplier's product register, the breakpoints and
       the word in a ``StreamStage`` beside it. On the ECP5 both multiplier registers are the
       MULT18X18D's own, so the DSP block has no fabric logic on either side within the cycle.
       ``o_word`` is this stage's output through the interpolation
       ``T[i] + floor((T[i+1] - T[i]) j / 2**G)`` of each half (a 16-bit add) and the word
       (unchanged when ``select`` is 0 or 3): combinational, no register after the add.

    A multiplier has one enable for its operand and product registers, so stages 2 and 3 move
    together, on that enable: each is offered a word only when its output is free, which keeps
    both stream stages out of their skid registers and in step with the multipliers. Stage 1's
    ``StreamStage`` takes a stall from stage 2 like any stream stage, so ``i_word.ready`` stays a
    register; ``o_word.ready`` reaches the stage 2 and 3 registers' enable and stage 1's output
    within the cycle.

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
        self.carried_layout = data.StructLayout({
            "word": unsigned(32), "select": unsigned(2), "wide": unsigned(1),
            "below_low": signed(16), "below_high": signed(16)})
        super().__init__({
            "i_word": In(stream.Signature(self.input_layout)),
            "o_word": Out(stream.Signature(unsigned(32))),
        })

    def elaborate(self, platform):
        m = Module()
        gap_bits = self.gap_bits
        m.submodules.position_stage = position_stage = StreamStage(self.position_layout)
        m.submodules.breakpoint_stage = breakpoint_stage = StreamStage(self.carried_layout)
        m.submodules.product_stage = product_stage = StreamStage(self.carried_layout)
        multipliers = {}
        for half in ("low", "high"):
            multipliers[half] = RegisteredMultiplier(signed(17), unsigned(gap_bits))
            m.submodules[f"interpolation_{half}"] = multipliers[half]

        # The breakpoint and product stages and the multipliers' registers move together, on ``advance``
        # (the product stage's output is free): each stage is offered a word only on ``advance`` and its
        # output is taken only on ``advance``, so neither ever fills its skid register and both act as
        # registers enabled by ``advance``, in step with the multipliers' operand registers (beside the
        # breakpoint stage) and product registers (beside the product stage), which share one enable.
        advance = Signal()
        m.d.comb += [
            advance.eq(~product_stage.o_stream.valid | self.o_word.ready),
            breakpoint_stage.i_stream.valid.eq(position_stage.o_stream.valid & advance),
            position_stage.o_stream.ready.eq(breakpoint_stage.i_stream.ready & advance),
            product_stage.i_stream.valid.eq(breakpoint_stage.o_stream.valid & advance),
            breakpoint_stage.o_stream.ready.eq(product_stage.i_stream.ready & advance),
            product_stage.i_stream.payload.eq(breakpoint_stage.o_stream.payload),
            *(multiplier.enable.eq(advance) for multiplier in multipliers.values()),
        ]

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

        # Stage 2: the selected table's breakpoint ``T[i]`` and difference ``T[i+1] - T[i]`` (a table of its
        # own) below each position, and the position inside the segment: the difference and the position
        # into the multiplier's operand registers, the rest into the breakpoint stage.
        at = position_stage.o_stream.payload
        points = breakpoint_stage.i_stream.payload
        m.d.comb += [points.word.eq(at.word), points.select.eq(at.select), points.wide.eq(at.wide)]
        tables = {select: lut_table(self.activation if key == "f" else f"{self.activation}_grad", self.table_bits,
                                    self.frac_bits, self.out_frac_bits) for key, select in LUT_SELECT.items()}
        for half in ("low", "high"):
            index = getattr(at, f"offset_{half}")[gap_bits:]
            below = {}
            difference = {}
            for select, table in tables.items():
                below_rom = Memory(shape=signed(16), depth=len(table) - 1, init=[int(v) for v in table[:-1]])
                difference_rom = Memory(shape=signed(17), depth=len(table) - 1,
                                        init=[int(v) for v in table[1:] - table[:-1]])
                m.submodules[f"table{select}_{half}"] = below_rom
                m.submodules[f"difference{select}_{half}"] = difference_rom
                below_port = below_rom.read_port(domain="comb")
                difference_port = difference_rom.read_port(domain="comb")
                m.d.comb += [below_port.addr.eq(index), difference_port.addr.eq(index)]
                below[select], difference[select] = below_port.data, difference_port.data
            second, first = LUT_SELECT["df"], LUT_SELECT["f"]
            chosen_below = Signal(signed(16), name=f"below_{half}")
            chosen_difference = Signal(signed(17), name=f"difference_{half}")
            m.d.comb += [
                chosen_below.eq(Mux(at.select == second, below[second], below[first])),
                chosen_difference.eq(Mux(at.select == second, difference[second], difference[first])),
                getattr(points, f"below_{half}").eq(chosen_below),
                multipliers[half].a.eq(chosen_difference),
                multipliers[half].b.eq(getattr(at, f"offset_{half}")[:gap_bits]),
            ]

        # Stage 3: the product ``(T[i+1] - T[i]) j`` of each half, registered beside the product stage.
        # Then, on the way out, the interpolation ``T[i] + floor(product / 2**G)`` of each half and the word.
        got = product_stage.o_stream.payload
        values = {}
        for half in ("low", "high"):
            value = Signal(signed(16), name=f"value_{half}")
            m.d.comb += value.eq(getattr(got, f"below_{half}") + (multipliers[half].product >> gap_bits))
            values[half] = value
        looked_up = Signal(unsigned(32))
        m.d.comb += [
            looked_up.eq(Mux(got.wide, values["low"].as_signed(),
                             values["low"].as_unsigned() | (values["high"].as_unsigned() << 16))),
            self.o_word.payload.eq(Mux((got.select == LUT_SELECT["f"]) | (got.select == LUT_SELECT["df"]),
                                       looked_up, got.word)),
            self.o_word.valid.eq(product_stage.o_stream.valid),
            product_stage.o_stream.ready.eq(self.o_word.ready),
        ]
        return m
