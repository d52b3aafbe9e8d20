"""Fixed 32/16 MAC array with low-overhead stochastic rounding (NeuroTrainer, Section 3.3.2, Fig. 11, Table 1)."""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import mac as spec
from ...spec.neurotrainer.mac import reset_state, xorshift_seeds
from ..registered_multiplier import RegisteredMultiplier
from ..stream_stage import StreamStage
from ..synthesis import replica_attrs

__all__ = ["NTMAC"]

#: The four partial products of a lane, named ``<half of a>_<half of x>``.
PARTIAL_PRODUCTS = ("low_low", "low_high", "high_low", "high_high")


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

    Five-stage pipeline: the operands registered per multiplier (the 17-bit halves, a register of
    its own for each of the two multipliers that read it); one split multiplier array per lane (four registered
    17x17 partial products shared by both modes: 4 MULT18 per lane; these two stages are one
    :class:`~trainforge.hw.registered_multiplier.RegisteredMultiplier` per partial product, on the ECP5 the
    MULT18X18D's own input and output registers); two registered sums of partial products
    (the rounding offset enters here); the rounded product ``(p + r) >> F`` (per half
    ``p_h >> F16``), feed-forward since ``((y << F) + p + r) >> F = y + ((p + r) >> F)``
    exactly; the accumulator loop, a saturating add only. One row per
    cycle unless a ``read`` row finds the output stage full. A ``read`` row's result is valid
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
    lane_operands : bool
        Not a block parameter (the PE's choice): the row carries ``a_lanes``, one operand per
        lane, instead of ``a`` (the PE's element-wise product pass; the PE registers the words,
        so the operand registers of each lane are still fed by a register, nothing in between).

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
    LATENCY = spec.LATENCY

    def __init__(self, *, lane_operands=False, **params):
        self.PARAMS.apply(self, **params)
        self.lane_operands = lane_operands
        self.row_layout = spec.row_layout(self.params, lane_operands)
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

        # Stage 1: one split multiplier array per lane, shared by both modes: four 17x17 signed
        # partial products of the 16-bit halves. The low halves enter zero-extended in 32-bit mode
        # (they are the unsigned low digits of a and x) and sign-extended in 16-bit mode (they are
        # the low 16-bit operands); the high halves are signed in both modes.
        # Stage 0 registers them first, one register pair per multiplier: the 17-bit operand halves
        # (their extension bits computed in front), so that the broadcast of ``a`` and ``x`` ends at
        # registers beside every MULT18 (on the ECP5, inside it).
        # Both stages are one RegisteredMultiplier per partial product: on the ECP5 the MULT18X18D's own
        # input and output registers (no fabric flip-flop on either side of the DSP block), elsewhere
        # flip-flops around ``*`` (the operand registers marked as replicas), with the same cycles.
        row = self.i_row.payload
        multipliers = [{product: RegisteredMultiplier(signed(17), signed(17)) for product in PARTIAL_PRODUCTS}
                       for lane in range(self.lanes)]
        for lane, lane_multipliers in enumerate(multipliers):
            for product, multiplier in lane_multipliers.items():
                m.submodules[f"multiplier_{product}_{lane}"] = multiplier
        operands_valid = Signal()
        operands_wide = Signal()
        operands_sr = Signal()
        operands_clear = Signal()
        operands_read = Signal()
        low_low = [multipliers[lane]["low_low"].product for lane in range(self.lanes)]
        low_high = [multipliers[lane]["low_high"].product for lane in range(self.lanes)]
        high_low = [multipliers[lane]["high_low"].product for lane in range(self.lanes)]
        high_high = [multipliers[lane]["high_high"].product for lane in range(self.lanes)]
        products_valid = Signal()
        products_wide = Signal()
        products_sr = Signal()
        products_clear = Signal()
        products_read = Signal()

        # Stage 2: the product's two sums of partial products (the cross terms; the outer ones with
        # the rounding offset), registered.
        cross = [Signal(signed(35), name=f"cross_{lane}") for lane in range(self.lanes)]
        outer = [Signal(signed(67), name=f"outer_{lane}") for lane in range(self.lanes)]
        sums_valid = Signal()
        sums_wide = Signal()
        sums_clear = Signal()
        sums_read = Signal()

        # Stage 3: the rounded product q = (p + r) >> F (feed-forward), clamped to a range in which
        # the accumulator's saturation gives the same result; per 16-bit half likewise.
        # ((y << F) + p + r) >> F = y + ((p + r) >> F) exactly, since y << F has no fraction bits.
        rounded32 = [Signal(signed(33), name=f"rounded32_{lane}") for lane in range(self.lanes)]
        rounded16 = [[Signal(signed(17), name=f"rounded16_{lane}_{half}") for half in range(2)]
                     for lane in range(self.lanes)]
        halves16 = [[Signal(signed(34), name=f"product16_{lane}_{half}") for half in range(2)]
                    for lane in range(self.lanes)]
        rounded_valid = Signal()
        # The accumulator loop's mode and clear, one replica per lane (each drives 32 bits of its lane's
        # loop only, so that the register can sit beside it).
        rounded_wide = [Signal(name=f"rounded_wide_{lane}", attrs=replica_attrs()) for lane in range(self.lanes)]
        rounded_clear = [Signal(name=f"rounded_clear_{lane}", attrs=replica_attrs()) for lane in range(self.lanes)]
        rounded_read = Signal()

        # Stage 4: the accumulator loop, a saturating add only; results to the output stage.
        accumulators = [Signal(32, name=f"y_{lane}") for lane in range(self.lanes)]
        m.submodules.output_stage = output_stage = StreamStage(self.result_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_y))
        accumulate = Signal()
        advance = Signal()
        m.d.comb += [
            # A read row waits for the output stage's (registered) ready; the stage's valid is a register.
            output_stage.i_stream.valid.eq(rounded_valid & rounded_read),
            accumulate.eq(rounded_valid & (~rounded_read | output_stage.i_stream.ready)),
            advance.eq(~rounded_valid | accumulate),
            self.i_row.ready.eq(advance),
        ]
        # The generators step once per row, as it leaves stage 1 (rows keep their order).
        random_words = self._random_words(m, advance & products_valid)
        with m.If(advance):
            m.d.sync += [
                operands_valid.eq(self.i_row.valid),
                operands_wide.eq(row.wide),
                operands_sr.eq(row.sr),
                operands_clear.eq(row.clear),
                operands_read.eq(row.read),
                products_valid.eq(operands_valid),
                products_wide.eq(operands_wide),
                products_sr.eq(operands_sr),
                products_clear.eq(operands_clear),
                products_read.eq(operands_read),
                sums_valid.eq(products_valid),
                sums_wide.eq(products_wide),
                sums_clear.eq(products_clear),
                sums_read.eq(products_read),
                rounded_valid.eq(sums_valid),
                *(replica.eq(sums_wide) for replica in rounded_wide),
                *(replica.eq(sums_clear) for replica in rounded_clear),
                rounded_read.eq(sums_read),
            ]
        for lane in range(self.lanes):
            x = row.x[lane]
            a = row.a_lanes[lane] if self.lane_operands else row.a
            halves = {"a_low": Cat(a[:16], ~row.wide & a[15]), "a_high": a[16:32].as_signed(),
                      "x_low": Cat(x[:16], ~row.wide & x[15]), "x_high": x[16:32].as_signed()}
            for product, multiplier in multipliers[lane].items():
                a_half, x_half = (f"{operand}_{half}" for operand, half in zip("ax", product.split("_")))
                m.d.comb += [multiplier.a.eq(halves[a_half]), multiplier.b.eq(halves[x_half]),
                             multiplier.enable.eq(advance)]

        for lane in range(self.lanes):
            # 32-bit mode: p = a*x from the four partial products, plus the rounding offset.
            if random_words is not None and frac > 0:
                offset = Mux(products_sr, random_words[lane][:frac], 0)
            elif self.rounding == "nearest" and frac > 0:
                offset = Const(1 << (frac - 1), frac)
            else:
                offset = Const(0, 1)
            with m.If(advance):
                m.d.sync += [
                    cross[lane].eq(low_high[lane] + high_low[lane]),
                    outer[lane].eq((high_high[lane] << 32) + low_low[lane] + offset),
                    halves16[lane][0].eq(low_low[lane]),
                    halves16[lane][1].eq(high_high[lane]),
                ]
            total32 = Signal(signed(68), name=f"total32_{lane}")
            m.d.comb += total32.eq(outer[lane] + (cross[lane] << 16))
            with m.If(advance):
                m.d.sync += rounded32[lane].eq(_clamp(m, total32[frac:].as_signed(), 33, f"q32_{lane}"))
                for half in range(2):
                    m.d.sync += rounded16[lane][half].eq(
                        _clamp(m, halves16[lane][half][frac16:].as_signed(), 17, f"q16_{lane}_{half}"))

            y_old = Mux(rounded_clear[lane], 0, accumulators[lane])
            sum32 = Signal(signed(34), name=f"sum32_{lane}")
            m.d.comb += sum32.eq(y_old.as_signed() + rounded32[lane])
            y32 = _saturate(m, sum32, 32, f"y32_{lane}")
            saturated = []
            for half in range(2):
                sum16 = Signal(signed(18), name=f"sum16_{lane}_{half}")
                m.d.comb += sum16.eq(y_old[16 * half:16 * half + 16].as_signed() + rounded16[lane][half])
                saturated.append(_saturate(m, sum16, 16, f"y16_{lane}_{half}"))
            updated = Signal(32, name=f"updated_{lane}")
            m.d.comb += updated.eq(Mux(rounded_wide[lane], y32, Cat(*saturated)))
            m.d.comb += output_stage.i_stream.payload[lane].eq(updated)
            with m.If(accumulate):
                m.d.sync += accumulators[lane].eq(updated)
        return m


def _clamp(m, value, bits, name):
    """``value`` clamped to the signed ``bits``-bit range, as a signed ``bits``-bit signal.

    Adding a value beyond that range to a ``bits - 1``-bit signed accumulator saturates exactly
    as adding the range's end does (``y + 2**(bits-1) - 1 >= 2**(bits-2) - 1`` for every ``y``),
    so the clamp keeps every result of the saturating add. The test is on the top bits only.
    """
    result = Signal(signed(bits), name=name)
    m.d.comb += result.eq(_clamp_value(value, bits))
    return result


def _clamp_value(value, bits):
    top = value[bits - 1:]
    fits = (top == 0) | (top == (1 << len(top)) - 1)
    high, low = (1 << (bits - 1)) - 1, 1 << (bits - 1)
    return Mux(fits, value[:bits], Mux(value[-1], Const(low, bits), Const(high, bits)))


def _saturate(m, value, bits, name):
    """``value`` clamped to the signed ``bits``-bit range, as a ``bits``-bit signal."""
    result = Signal(bits, name=name)
    m.d.comb += result.eq(_clamp_value(value, bits))
    return result
