"""Fixed 32/16 MAC array with low-overhead stochastic rounding (NeuroTrainer, Section 3.3.2, Fig. 11, Table 1)."""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import mac as spec
from ...spec.neurotrainer.mac import reset_state, xorshift_seeds
from ..stream_stage import StreamStage

__all__ = ["NTMAC"]


class NTMAC(wiring.Component):
    """A row of k fixed-point MACs computing ``y = a * x + y`` in 32-bit or dual 16-bit mode.

    Each accepted row carries one broadcast word ``a`` (from input buffer 1) and
    ``lanes`` words ``x`` (from input buffer 2). Lane ``i`` keeps a 32-bit
    accumulator ``y[i]``:

    - ``wide = 1`` (32-bit mode): ``y = sat32((a*x + (y << F) + r) >> F)``, two's complement
      Q(31-F).F operands, ``F = frac_bits``. ``r`` is the rounding offset: random bits masked
      to the F dropped positions when ``sr = 1`` in an SR variant, ``1 << (F-1)`` in the
      ``nearest`` variant, else 0 (the cropper truncates, i.e. rounds toward minus infinity).
    - ``wide = 0`` (16-bit mode): each word holds two Q(15-F16).F16 halves and each half
      computes ``y_h = sat16((a_h*x_h + (y_h << F16)) >> F16)``, always truncated (no noise).

    ``clear`` starts the row from ``y = 0``; after a ``read`` row the k accumulators are
    sent on ``o_y``. Random generators (SR variants only) step once per accumulated row:

    - ``sr_lo``: one 8-stage LFSR (x^8+x^6+x^5+x^4+1) whose feedback bit shifts into one
      32-bit left-shift register shared by all lanes (Fig. 11);
    - ``sr_full``: one 32-bit xorshift generator per lane (Table 1's "SR" with a full-width
      random number per MAC).

    Two-stage pipeline (multiply, then add/round/saturate); one row per cycle unless a
    ``read`` row finds the output stage full. A ``read`` row's result is valid
    :attr:`LATENCY` cycles after its acceptance. Results leave through a
    :class:`~trainforge.hw.stream_stage.StreamStage` (it holds up to two), so ``i_row.ready``
    does not depend on ``o_y.ready`` within a cycle.

    Parameters
    ----------
    lanes : int
        Number of MACs k.
    frac_bits : int
        Fraction bits F of the 32-bit format.
    frac_bits16 : int
        Fraction bits F16 of the 16-bit format.
    rounding : str
        ``sr_lo``, ``sr_full``, ``truncate`` or ``nearest`` (Table 1 variants).
    seed : int
        Seed of the random generators (the LFSR's initial state for ``sr_lo``).

    Members
    -------
    i_row : In(stream.Signature(row_layout))
        Operand rows with the ``wide``, ``sr``, ``clear`` and ``read`` flags.
    o_y : Out(stream.Signature(result_layout))
        The k accumulator words after each ``read`` row.

    Attributes
    ----------
    row_layout : data.StructLayout
        ``a`` (32 bits), ``x`` (array of ``lanes`` 32-bit words), ``wide``, ``sr``, ``clear``, ``read``.
    result_layout : data.ArrayLayout
        ``lanes`` 32-bit accumulator words.
    """

    PARAMS = spec.PARAMS

    #: Cycles from the acceptance of a ``read`` row to its result on ``o_y``, without stalls.
    LATENCY = 2

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.row_layout = spec.row_layout(self.params)
        self.result_layout = spec.result_layout(self.params)
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_y": Out(stream.Signature(self.result_layout)),
        })

    def _random_words(self, m, step):
        """Per-lane random words (32 bits) for the row in stage 2; the generators advance on ``step``."""
        if self.rounding == "sr_lo":
            lfsr_reset, register_reset = reset_state(self.seed)
            lfsr = Signal(8, init=lfsr_reset)
            register = Signal(32, init=register_reset)
            feedback = lfsr[7] ^ lfsr[5] ^ lfsr[4] ^ lfsr[3]
            with m.If(step):
                m.d.sync += [
                    lfsr.eq(Cat(feedback, lfsr[:7])),
                    register.eq(Cat(feedback, register[:31])),
                ]
            return [register] * self.lanes
        if self.rounding == "sr_full":
            words = []
            for lane, seed in enumerate(xorshift_seeds(self.seed, self.lanes)):
                state = Signal(32, init=int(seed), name=f"xorshift_{lane}")
                first = Signal(32, name=f"xorshift_{lane}_a")
                second = Signal(32, name=f"xorshift_{lane}_b")
                third = Signal(32, name=f"xorshift_{lane}_c")
                m.d.comb += [
                    first.eq(state ^ (state << 13)[:32]),
                    second.eq(first ^ (first >> 17)),
                    third.eq(second ^ (second << 5)[:32]),
                ]
                with m.If(step):
                    m.d.sync += state.eq(third)
                words.append(state)
            return words
        return None

    def elaborate(self, platform):
        m = Module()
        frac, frac16 = self.frac_bits, self.frac_bits16

        # Stage 1: products (one 32x32 and two 16x16 per lane) and flags.
        product32 = [Signal(signed(64), name=f"product32_{lane}") for lane in range(self.lanes)]
        product16 = [[Signal(signed(32), name=f"product16_{lane}_{half}") for half in range(2)]
                     for lane in range(self.lanes)]
        stage_valid = Signal()
        stage_wide = Signal()
        stage_sr = Signal()
        stage_clear = Signal()
        stage_read = Signal()

        # Stage 2: add, round, crop, saturate into the accumulators; results to the output stage.
        accumulators = [Signal(32, name=f"y_{lane}") for lane in range(self.lanes)]
        m.submodules.output_stage = output_stage = StreamStage(self.result_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_y))
        accumulate = Signal()
        advance = Signal()
        m.d.comb += [
            # A read row waits for the output stage's (registered) ready; the stage's valid is a register.
            output_stage.i_stream.valid.eq(stage_valid & stage_read),
            accumulate.eq(stage_valid & (~stage_read | output_stage.i_stream.ready)),
            advance.eq(~stage_valid | accumulate),
            self.i_row.ready.eq(advance),
        ]
        random_words = self._random_words(m, accumulate)
        row = self.i_row.payload
        with m.If(advance):
            m.d.sync += [
                stage_valid.eq(self.i_row.valid),
                stage_wide.eq(row.wide),
                stage_sr.eq(row.sr),
                stage_clear.eq(row.clear),
                stage_read.eq(row.read),
            ]
            for lane in range(self.lanes):
                m.d.sync += product32[lane].eq(row.a.as_signed() * row.x[lane].as_signed())
                for half in range(2):
                    m.d.sync += product16[lane][half].eq(
                        row.a[16 * half:16 * half + 16].as_signed() * row.x[lane][16 * half:16 * half + 16].as_signed())

        for lane in range(self.lanes):
            y_old = Mux(stage_clear, 0, accumulators[lane])
            # 32-bit mode.
            if random_words is not None and frac > 0:
                offset = Mux(stage_sr, random_words[lane][:frac], 0)
            elif self.rounding == "nearest" and frac > 0:
                offset = Const(1 << (frac - 1), frac)
            else:
                offset = Const(0, 1)
            total32 = Signal(signed(66), name=f"total32_{lane}")
            m.d.comb += total32.eq(product32[lane] + (y_old.as_signed() << frac) + offset)
            y32 = _saturate(m, total32[frac:].as_signed(), 32, f"y32_{lane}")
            # 16-bit mode.
            halves = []
            for half in range(2):
                total16 = Signal(signed(34), name=f"total16_{lane}_{half}")
                m.d.comb += total16.eq(product16[lane][half] + (y_old[16 * half:16 * half + 16].as_signed() << frac16))
                halves.append(_saturate(m, total16[frac16:].as_signed(), 16, f"y16_{lane}_{half}"))
            updated = Signal(32, name=f"updated_{lane}")
            m.d.comb += updated.eq(Mux(stage_wide, y32, Cat(*halves)))
            m.d.comb += output_stage.i_stream.payload[lane].eq(updated)
            with m.If(accumulate):
                m.d.sync += accumulators[lane].eq(updated)
        return m


def _saturate(m, value, bits, name):
    """``value`` clamped to the signed ``bits``-bit range, as a ``bits``-bit signal."""
    high, low = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    result = Signal(bits, name=name)
    with m.If(value > high):
        m.d.comb += result.eq(high)
    with m.Elif(value < low):
        m.d.comb += result.eq(Const(low, signed(bits)))
    with m.Else():
        m.d.comb += result.eq(value[:bits])
    return result
