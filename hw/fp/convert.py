"""FP format steps without an adder: FP16 -> FP32 widening, scaling by ``2**-shift``, FP32 -> FP16 rounding.

Combinational; the steps and rules are those of :func:`trainforge.golden.fp.fp16_to_fp32`,
:func:`~trainforge.golden.fp.fp32_scale_down` and :func:`~trainforge.golden.fp.fp32_to_fp16` (policy:
:mod:`trainforge.spec.fp`: subnormals flushed on input and output, round to nearest even, canonical quiet NaN).
``cp_core``'s UPDATE write-back with ``mac="fp16"`` uses all three.
"""
from amaranth import C, Cat, Mux, Signal, signed

from ...spec.fp import FP16, FP32

__all__ = ["fp16_to_fp32", "fp32_scale_down", "fp32_to_fp16"]

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


def fp32_to_fp16(m, bits, name):
    """FP32 ``bits`` rounded to FP16: nearest even on the 13 dropped fraction bits, overflow to ``+-Inf``,
    a rounded value below ``2**-14`` flushed to a zero of its sign, NaN to ``0x7E00`` (a named 16-bit net)."""
    sign, exponent, fraction, zero, inf, nan = _fields(bits, FP32)
    kept = Cat(fraction[_EXTRA_BITS:], C(1, 1))  # the 11 significand bits that stay
    guard = fraction[_EXTRA_BITS - 1]
    sticky = fraction[:_EXTRA_BITS - 1] != 0
    rounded = Signal(FP16.significand_bits + 1, name=f"{name}_rounded")
    m.d.comb += rounded.eq(kept + (guard & (sticky | kept[0])))
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
