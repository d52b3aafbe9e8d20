"""Goldschmidt reciprocal of CATERPILLAR (softmax's ``1 / sum``) on the PE's MAC unit with a small lookup table."""
from amaranth import C, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.caterpillar import (RECIPROCAL_PARAMS, reciprocal_operand_bits, reciprocal_result_bits, reciprocal_table,
                                 reciprocal_table_fp16, result_width)
from ...spec.fp import FP16, FP32
from ..fp.convert import fp16_to_fp32, fp32_to_fp16
from ..stream_stage import StreamStage
from .mac import MAC_UNITS

__all__ = ["CPReciprocal"]


class CPReciprocal(wiring.Component):
    """Fixed-point reciprocal by Goldschmidt iterations, one MAC per cycle, bit-exact with
    :func:`trainforge.golden.caterpillar.goldschmidt.reciprocal_unit`.

    For each value ``D`` (``frac`` fraction bits) taken from ``i_value``:

    1. **Normalise and look up** (the cycle of acceptance): ``L`` = bit length
       of ``D``; ``d = D >> (L - frac)`` (or ``<<``) lies in
       ``[2**(frac-1), 2**frac)``; ``N = table[d's table_bits bits after its
       leading one]`` (``1 / midpoint`` of the interval, ``2**table_bits``
       constants).
    2. **MACs** on the MAC unit (``mac``, the PE's swappable unit, here with
       operands of ``frac + 3`` bits): ``Q = (d * N) >> frac``; then for each
       iteration ``F = 2 - Q``, ``N = (N * F) >> frac`` and, except after the
       last, ``Q = (Q * F) >> frac``: ``2 * iterations`` MAC cycles.
    3. **Denormalise** in the cycle of the last MAC step: ``N >> (L - frac)``
       (or ``<<``), offered to the shared output stage
       (:class:`~trainforge.hw.stream_stage.StreamStage`); a zero value gives
       all ones.

    The result is on ``o_result`` :func:`~trainforge.spec.caterpillar.unit_latency`
    cycles after its value was accepted. The next value is accepted in the
    cycle the last MAC step hands the result to the output stage, so without
    backpressure values are taken :func:`~trainforge.spec.caterpillar.unit_interval`
    cycles apart. ``i_value.ready`` depends only on registers (the unit's own
    state and the stage's registered ``ready``), never on ``o_result.ready``;
    the stage holds up to two results while the consumer stalls.

    Parameters
    ----------
    width : int
        Bits of an input value (unsigned).
    frac : int
        Fraction bits of inputs and results.
    table_bits : int
        Lookup-table index bits (``2 ** table_bits`` entries).
    iterations : int
        Goldschmidt iterations.
    mac : str
        MAC unit, a key of :data:`~trainforge.hw.caterpillar.mac.MAC_UNITS`.

    With ``mac="fp16"`` (``width`` 32) the values and results are FP32 bit patterns and the same schedule runs
    on the half-precision FPU (:class:`~trainforge.hw.caterpillar.mac.CPHalfPrecisionMAC`), bit-exact with
    :func:`trainforge.golden.caterpillar.goldschmidt.reciprocal_unit_fp16`: at acceptance ``d = 1.f / 2``
    rounded to FP16 and ``x0`` from an FP16 table; each MAC step is the exact product of two FP16 registers
    plus ``+0``, rounded to FP16; ``F = 2 - Q`` is the FPU's FP32 adder, rounded to FP16; the result is ``N``
    widened to FP32 with its exponent lowered by ``E - 126`` (flushed below FP32's normals); zero gives
    ``+-Inf``, ``+-Inf`` gives ``+-0``, NaN the canonical NaN.

    Members
    -------
    i_value : In(stream.Signature(unsigned(width)))
    o_result : Out(stream.Signature(unsigned(2 * frac + 2)))
        (``fp16``: ``unsigned(32)``.)
    """

    PARAMS = RECIPROCAL_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        super().__init__({
            "i_value": In(stream.Signature(unsigned(self.width))),
            "o_result": Out(stream.Signature(unsigned(reciprocal_result_bits(self.params)))),
        })

    def elaborate(self, platform):
        if self.mac == "fp16":
            return self._elaborate_fp16()
        m = Module()
        frac, width = self.frac, self.width
        operand_bits = reciprocal_operand_bits(frac)  # N, Q, F and d are below 2 ** (frac + 1)
        mac_unit = MAC_UNITS[self.mac](operand_bits + 1, 2 * operand_bits + 2)

        # ---- normalise and look up (combinational, from the offered value) ----
        # Only Mux chains and shifts: Amaranth writes them as continuous assignments.
        value = self.i_value.payload
        length = Const(0, range(width + 1))
        for bit in range(width):
            length = Mux(value[bit], bit + 1, length)
        right = Signal(range(width + 1))
        left = Signal(range(frac + 1))
        normalised = Signal(frac)
        table = reciprocal_table(self.table_bits, frac)
        lookup = Signal(operand_bits)
        m.d.comb += [
            right.eq(Mux(length > frac, length - frac, 0)),
            left.eq(Mux(length < frac, frac - length, 0)),
            normalised.eq((value >> right) << left),
            lookup.eq(Cat(*(Const(int(entry), operand_bits) for entry in table)).word_select(
                normalised[frac - 1 - self.table_bits:frac - 1], operand_bits)),
        ]

        # ---- registers ----
        d = Signal(operand_bits)
        n = Signal(operand_bits)
        q = Signal(operand_bits)
        shift_right = Signal.like(right)
        shift_left = Signal.like(left)
        zero = Signal()
        busy, step, output_stage, last_step, handoff = self._step_control(m, result_width(frac))
        with m.If(handoff):
            m.d.sync += busy.eq(0)
        with m.If(self.i_value.valid & self.i_value.ready):
            m.d.sync += [d.eq(normalised), n.eq(lookup), shift_right.eq(right), shift_left.eq(left),
                         zero.eq(length == 0), step.eq(0), busy.eq(1)]

        # ---- MAC steps: step 0 Q = d N; odd steps N = N F; even steps Q = Q F (F = 2 - Q) ----
        two = 2 << frac
        factor = Signal(operand_bits)
        first_operand = Signal(operand_bits)
        second_operand = Signal(operand_bits)
        product = Signal(2 * operand_bits + 2)
        m.d.comb += [
            factor.eq(two - q),
            first_operand.eq(Mux(step == 0, d, Mux(step[0], n, q))),
            second_operand.eq(Mux(step == 0, n, factor)),
            product.eq(mac_unit.multiply_accumulate(Cat(first_operand, 0).as_signed(),
                                                     Cat(second_operand, 0).as_signed(), 0)),
        ]
        scaled = product[frac:frac + operand_bits]
        saturated = (1 << result_width(frac)) - 1
        m.d.comb += [
            output_stage.i_stream.valid.eq(last_step),
            output_stage.i_stream.payload.eq(Mux(zero, saturated, (n >> shift_right) << shift_left)),
        ]
        with m.If(busy & ~last_step):
            m.d.sync += step.eq(step + 1)
            with m.If((step == 0) | ~step[0]):
                m.d.sync += q.eq(scaled)
            with m.Else():
                m.d.sync += n.eq(scaled)
        return m


    def _step_control(self, m, result_bits):
        """The step counter and handshake both MAC units share: ``(busy, step, output_stage, last_step, handoff)``.

        ``step`` runs 0 .. 2 * iterations while ``busy``; the last step hands the result to the output stage
        when its registered ``ready`` is high, and ``i_value.ready`` comes from registers only (``busy``,
        ``step`` and that ``ready``).
        """
        busy = Signal()
        step = Signal(range(2 * self.iterations + 2))  # at least one bit, also for 0 iterations
        m.submodules.output_stage = output_stage = StreamStage(unsigned(result_bits))
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_result))
        last_step = Signal()
        handoff = Signal()
        m.d.comb += [
            last_step.eq(busy & (step == 2 * self.iterations)),
            handoff.eq(last_step & output_stage.i_stream.ready),
            self.i_value.ready.eq(~busy | handoff),
        ]
        return busy, step, output_stage, last_step, handoff

    def _elaborate_fp16(self):
        """The ``fp16`` unit: the schedule of the fixed-point one on FP16 registers (class docstring)."""
        m = Module()
        mac_unit = MAC_UNITS["fp16"](FP16.width, FP32.width, m, "reciprocal_fpu")
        value = self.i_value.payload
        exponent = value[FP32.fraction_bits:FP32.width - 1]
        fraction = value[:FP32.fraction_bits]
        # ---- normalise and look up at acceptance: d = 1.f / 2 rounded to FP16, x0 from the FP16 table ----
        normalised = fp32_to_fp16(m, Cat(fraction, C(FP32.bias - 1, FP32.exponent_bits), C(0, 1)),
                                  "reciprocal_normalised")
        table = reciprocal_table_fp16(self.table_bits)
        lookup = Signal(FP16.width)
        m.d.comb += lookup.eq(Cat(*(Const(int(entry), FP16.width) for entry in table)).word_select(
            fraction[FP32.fraction_bits - self.table_bits:], FP16.width))

        # ---- registers ----
        d = Signal(FP16.width)
        n = Signal(FP16.width)
        q = Signal(FP16.width)
        sign = Signal()
        scale = Signal(FP32.exponent_bits)  # the value's exponent field E: the result's exponent drops by E - 126
        kind = Signal(2)  # 0 a normal value, 1 zero (-> Inf), 2 Inf (-> 0), 3 NaN
        busy, step, output_stage, last_step, handoff = self._step_control(m, FP32.width)
        top = exponent == FP32.exponent_max_field
        with m.If(handoff):
            m.d.sync += busy.eq(0)
        with m.If(self.i_value.valid & self.i_value.ready):
            m.d.sync += [d.eq(normalised), n.eq(lookup), sign.eq(value[FP32.width - 1]), scale.eq(exponent),
                         kind.eq(Mux(top, Mux(fraction == 0, 2, 3), Mux(exponent == 0, 1, 0))),
                         step.eq(0), busy.eq(1)]

        # ---- MAC steps: step 0 Q = d N; odd steps N = N F; even steps Q = Q F (F = fp16(2 - Q)) ----
        negated_q = fp16_to_fp32(m, q ^ FP16.sign_mask, "reciprocal_negated_q")
        factor = fp32_to_fp16(m, mac_unit.add(C(0x40000000, FP32.width), negated_q), "reciprocal_factor")
        first_operand = Signal(FP16.width)
        second_operand = Signal(FP16.width)
        m.d.comb += [
            first_operand.eq(Mux(step == 0, d, Mux(step[0], n, q))),
            second_operand.eq(Mux(step == 0, n, factor)),
        ]
        rounded = fp32_to_fp16(m, mac_unit.multiply_accumulate(first_operand, second_operand, C(0, FP32.width)),
                               "reciprocal_step")
        # ---- denormalise: N widened, its exponent field lowered by E - 126, flushed at 0 or below ----
        widened = fp16_to_fp32(m, n, "reciprocal_result_significand")
        field = Signal(signed(FP32.exponent_bits + 2))
        m.d.comb += field.eq(widened[FP32.fraction_bits:FP32.width - 1] - scale + (FP32.bias - 1))
        normal = Mux(field <= 0, 0, Cat(widened[:FP32.fraction_bits], field[:FP32.exponent_bits]))
        magnitude = Mux(kind == 0, normal, Mux(kind == 1, FP32.infinity() & 0x7FFFFFFF, 0))
        m.d.comb += [
            output_stage.i_stream.valid.eq(last_step),
            output_stage.i_stream.payload.eq(Mux(kind == 3, FP32.canonical_nan(), Cat(magnitude[:31], sign))),
        ]
        with m.If(busy & ~last_step):
            m.d.sync += step.eq(step + 1)
            with m.If((step == 0) | ~step[0]):
                m.d.sync += q.eq(rounded)
            with m.Else():
                m.d.sync += n.eq(rounded)
        return m
