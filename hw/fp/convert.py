"""FP format steps without an adder: FP16 -> FP32 widening, scaling by ``2**-shift``, FP32 -> FP16 rounding.

Combinational, but for :func:`fp32_to_fp16_pipelined` (the rounding cut by a register); the steps and rules are
those of :func:`trainforge.golden.fp.fp16_to_fp32`, :func:`~trainforge.golden.fp.fp32_scale_down` and
:func:`~trainforge.golden.fp.fp32_to_fp16` (policy: :mod:`trainforge.spec.fp`: subnormals flushed on input and
output, round to nearest even, canonical quiet NaN). ``cp_core``'s UPDATE write-back with ``mac="fp16"`` uses
the widening, the scaling and the pipelined rounding; ``cp_reciprocal`` the one-cycle rounding.
"""
from amaranth import C, Cat, Mux, Signal, signed

from ...spec.fp import FP16, FP32
from .stages import run_steps

__all__ = ["fp16_to_fp32", "fp32_scale_down", "fp32_to_fp16", "fp32_to_fp16_pipelined", "NARROW_STEPS"]

#: Difference of the two formats' exponent biases (127 - 15).
_BIAS_DIFFERENCE = FP32.bias - FP16.bias
#: Fraction bits that FP32 has beyond FP16 (dropped by the rounding, appended by the widening).
_EXTRA_BITS = FP32.fraction_bits - FP16.fraction_bits


def _fields(bits, fmt):
    exponent = bits[fmt.fraction_bits:fmt.width - 1]
    fraction = bits[:fmt.fraction_bits]
    top = exponent == fmt.exponent_max_field
    return bits[fmt.width - 1], exponent, fraction, exponent == 0, top & (fraction == 0), top & (fraction != 0)


def _special(sign, kind, fmt):
    """``kind``: ``"zero"`` or ``"inf"`` of ``sign``; ``"nan"``: the canonical NaN."""
    if kind == "nan":
        return C(fmt.canonical_nan(), fmt.width)
    field = fmt.exponent_max_field if kind == "inf" else 0
    return Cat(C(0, fmt.fraction_bits), C(field, fmt.exponent_bits), sign)


def fp16_to_fp32(m, bits, name):
    """FP16 ``bits`` widened to FP32, exactly (a named 32-bit net of ``m``)."""
    sign, exponent, fraction, zero, inf, nan = _fields(bits, FP16)
    normal = Cat(C(0, _EXTRA_BITS), fraction, (exponent + _BIAS_DIFFERENCE)[:FP32.exponent_bits], sign)
    result = Signal(FP32.width, name=name)
    m.d.comb += result.eq(Mux(nan, _special(sign, "nan", FP32), Mux(inf, _special(sign, "inf", FP32),
                                                                      Mux(zero, _special(sign, "zero", FP32),
                                                                          normal))))
    return result


def fp32_scale_down(m, bits, shift, name):
    """FP32 ``bits`` times ``2**-shift`` (``shift`` unsigned): the exponent minus ``shift``, or a flushed zero."""
    sign, exponent, fraction, zero, inf, nan = _fields(bits, FP32)
    field = Signal(signed(FP32.exponent_bits + 2), name=f"{name}_field")
    m.d.comb += field.eq(exponent - shift)
    result = Signal(FP32.width, name=name)
    m.d.comb += result.eq(Mux(nan, _special(sign, "nan", FP32), Mux(inf, _special(sign, "inf", FP32),
                              Mux(zero | (field <= 0), _special(sign, "zero", FP32),
                                  Cat(fraction, field[:FP32.exponent_bits], sign)))))
    return result


def _rounded_significand(fraction):
    """The 11 significand bits that stay of an FP32 ``fraction`` (its hidden one set), rounded to nearest even
    on the 13 dropped ones (guard: the top dropped bit; sticky: the OR of the 12 others): 12 bits, the top one
    the rounding carry (1.11...1 + ulp)."""
    kept = Cat(fraction[_EXTRA_BITS:], C(1, 1))
    guard = fraction[_EXTRA_BITS - 1]
    sticky = fraction[:_EXTRA_BITS - 1] != 0
    return kept + (guard & (sticky | kept[0]))


def fp32_to_fp16(m, bits, name):
    """FP32 ``bits`` rounded to FP16: nearest even on the 13 dropped fraction bits, overflow to ``+-Inf``,
    a rounded value below ``2**-14`` flushed to a zero of its sign, NaN to ``0x7E00`` (a named 16-bit net)."""
    sign, exponent, fraction, zero, inf, nan = _fields(bits, FP32)
    rounded = Signal(FP16.significand_bits + 1, name=f"{name}_rounded")
    m.d.comb += rounded.eq(_rounded_significand(fraction))
    carry = rounded[FP16.significand_bits]
    field = Signal(signed(FP32.exponent_bits + 2), name=f"{name}_field")
    m.d.comb += field.eq(exponent - _BIAS_DIFFERENCE + carry)
    # After a rounding carry the significand is 10.00...0: its low fraction bits are zero as they are.
    normal = Cat(rounded[:FP16.fraction_bits], field[:FP16.exponent_bits], sign)
    result = Signal(FP16.width, name=name)
    m.d.comb += result.eq(Mux(nan, _special(sign, "nan", FP16),
                              Mux(inf | (~zero & (field >= FP16.exponent_max_field)), _special(sign, "inf", FP16),
                                  Mux(zero | (field <= 0), _special(sign, "zero", FP16), normal))))
    return result


def _narrow_round(values):
    """Step 0 of :func:`fp32_to_fp16_pipelined`: the fields, the rounded significand (its carry not yet applied)
    and, for both outcomes of that carry, the FP16 exponent field and the overflow and flush decisions.

    The FP16 field is ``exponent - 112`` (plus the carry): its overflow (``>= 31``) and flush (``<= 0``)
    checks are comparisons of the FP32 exponent with constants, made beside the rounding's increment, so that
    the carry only selects (step 1).
    """
    sign, exponent, fraction, zero, inf, nan = _fields(values["bits"], FP32)
    # The FP16 field exponent - 112 (+ 1 after a carry): its low 5 bits, and its compares as the exponent's.
    field = (exponent - _BIAS_DIFFERENCE)[:FP16.exponent_bits]
    raised_field = (exponent - (_BIAS_DIFFERENCE - 1))[:FP16.exponent_bits]
    overflow_at = FP16.exponent_max_field + _BIAS_DIFFERENCE  # field >= 31
    return {
        "sign": sign, "nan": nan,
        "rounded": _rounded_significand(fraction),
        "field": field, "raised_field": raised_field,
        "overflow": inf | (~zero & (exponent >= overflow_at)),
        "raised_overflow": inf | (~zero & (exponent >= overflow_at - 1)),
        "flush": zero | (exponent <= _BIAS_DIFFERENCE),             # field <= 0
        "raised_flush": zero | (exponent <= _BIAS_DIFFERENCE - 1),  # field + 1 <= 0
    }


def _narrow_select(values):
    """Step 1 of :func:`fp32_to_fp16_pipelined`: the rounding carry selects the exponent field and the overflow
    and flush decisions of its outcome; then NaN, Inf, zero or the normal FP16 value. After a carry the
    significand is ``10.00...0``: its low fraction bits are zero as they are."""
    carry = values["rounded"][FP16.significand_bits]
    field = Mux(carry, values["raised_field"], values["field"])
    overflow = Mux(carry, values["raised_overflow"], values["overflow"])
    flush = Mux(carry, values["raised_flush"], values["flush"])
    sign = values["sign"]
    normal = Cat(values["rounded"][:FP16.fraction_bits], field, sign)
    return {"result": Mux(values["nan"], _special(sign, "nan", FP16),
                          Mux(overflow, _special(sign, "inf", FP16),
                              Mux(flush, _special(sign, "zero", FP16), normal)))}


#: The steps of :func:`fp32_to_fp16_pipelined`, in order.
NARROW_STEPS = (_narrow_round, _narrow_select)


def fp32_to_fp16_pipelined(m, bits, enable=1, name="fp32_to_fp16", register_result=True):
    """FP32 ``bits`` rounded to FP16 as :func:`fp32_to_fp16`, over two clock-enabled register stages.

    Stage 1 (:data:`NARROW_STEPS` step 0) registers the fields, the rounded significand with its carry, and
    the exponent field and the overflow and flush decisions for both outcomes of the carry; stage 2 (step 1)
    selects them by the carry and builds the result (NaN, ``+-Inf``, a flushed zero or the normal value). No
    logic is computed twice: the one-cycle rounding's ``field + carry`` and its compares become the
    comparisons of the exponent with constants and one 5-bit increment, in parallel with the significand's
    increment.

    Parameters
    ----------
    m : Module
        Where the registers and the named step results go.
    bits : Value
        The FP32 bit pattern (32 bits).
    enable : Value-castable
        Clock enable of the registers.
    name : str
        Prefix of the register names (``{name}_s{step}_{key}``).
    register_result : bool
        ``False`` leaves out stage 2's register: the result is then combinational after stage 1's registers,
        for a caller that registers it itself.

    Returns
    -------
    Value
        The 16-bit FP16 result.
    """
    cuts = (0, 1) if register_result else (0,)
    return run_steps(m, NARROW_STEPS, {"bits": bits}, cuts, enable, name)["result"]
