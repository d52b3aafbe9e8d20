"""Look-up-table unit for f(x) and f'(x) with linear interpolation (NeuroTrainer, Section 3.2)."""
from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import lut as spec
from ...spec.neurotrainer.lut import lut_table
from ..stream_stage import StreamStage

__all__ = ["NTLUT"]


class NTLUT(wiring.Component):
    """One function of the PMAG's LUTs: a breakpoint table read twice and linearly interpolated.

    The 16-bit input is read as an offset-binary number ``u = x + 2**15``; its top
    ``table_bits`` bits select segment ``i`` and the other ``G = 16 - table_bits`` bits are
    the position ``j`` inside it. A ROM (``lib.memory.Memory``) of ``2**table_bits + 1``
    breakpoints, computed at elaboration by
    :func:`~trainforge.golden.neurotrainer.lut.lut_table`, is read at ``i`` and ``i + 1``
    and the output is ``T[i] + floor((T[i+1] - T[i]) * j / 2**G)``.

    Two stages (table read, interpolate), one input per cycle unless ``o_y`` stalls; a
    result is valid :attr:`LATENCY` cycles after its input was accepted. The interpolated
    value leaves through a :class:`~trainforge.hw.stream_stage.StreamStage` (it holds up to
    two values), so ``i_x.ready`` does not depend on ``o_y.ready`` within a cycle.

    Parameters
    ----------
    function : str
        ``relu``, ``relu_grad``, ``tanh``, ``tanh_grad``, ``sigmoid``, ``sigmoid_grad``, ``exp`` or ``log``.
    table_bits : int
        log2 of the number of segments.
    frac_bits : int
        Fraction bits of the signed 16-bit input.
    out_frac_bits : int
        Fraction bits of the signed 16-bit output.

    Members
    -------
    i_x : In(stream.Signature(signed(16)))
    o_y : Out(stream.Signature(signed(16)))
    """

    PARAMS = spec.PARAMS

    #: Cycles from the acceptance of an input to its result on ``o_y``, without stalls.
    LATENCY = spec.LATENCY

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        super().__init__({
            "i_x": In(stream.Signature(signed(16))),
            "o_y": Out(stream.Signature(signed(16))),
        })

    def elaborate(self, platform):
        m = Module()
        gap_bits = 16 - self.table_bits
        table = lut_table(self.function, self.table_bits, self.frac_bits, self.out_frac_bits)
        m.submodules.table = rom = Memory(shape=signed(16), depth=len(table), init=[int(v) for v in table])
        low_port = rom.read_port()
        high_port = rom.read_port()

        offset = Signal(16)
        m.d.comb += offset.eq(self.i_x.payload.as_unsigned() ^ 0x8000)

        m.submodules.output_stage = output_stage = StreamStage(signed(16))
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_y))
        stage_valid = Signal()
        stage_position = Signal(unsigned(gap_bits))
        advance = Signal()
        m.d.comb += [
            # The table stage moves on when the output stage takes its value (a registered ready).
            advance.eq(~stage_valid | output_stage.i_stream.ready),
            self.i_x.ready.eq(advance),
            low_port.en.eq(advance),
            high_port.en.eq(advance),
            low_port.addr.eq(offset[gap_bits:]),
            high_port.addr.eq(offset[gap_bits:] + 1),
        ]
        with m.If(advance):
            m.d.sync += [stage_valid.eq(self.i_x.valid), stage_position.eq(offset[:gap_bits])]

        difference = Signal(signed(17))
        interpolated = Signal(signed(16))
        m.d.comb += [
            difference.eq(high_port.data - low_port.data),
            interpolated.eq(low_port.data + ((difference * stage_position) >> gap_bits)),
        ]
        m.d.comb += [output_stage.i_stream.valid.eq(stage_valid), output_stage.i_stream.payload.eq(interpolated)]
        return m
