"""The FP16 x FP16 (or BF16 x BF16) -> FP32 multiplier, exact, as steps that can be cut into register stages.

The steps and their order are those of :func:`trainforge.golden.fp.fp_mul_exact`
(policy: :mod:`trainforge.spec.fp`): the significand product of two 11-bit
(or 8-bit) significands fits FP32's 24 bits, so there is no rounding.

Step 0, ``unpack_multiply``
    Unpack, classify (exponent field 0 is a zero: input flush), XOR the
    signs, add the exponent fields, multiply the significands (the product
    maps to one hardware multiplier, MULT18X18 on the ECP5).
Step 1, ``normalise_pack``
    A product in [2, 4) moves the exponent up by one; the fraction is
    left-aligned to 23 bits; the FP32 exponent field is checked for
    overflow (Inf) and underflow (flushed signed zero, BF16 only); the
    specials override (NaN or Inf x 0 -> canonical NaN, Inf -> signed Inf,
    zero -> signed zero); an idle lane gives ``+0``.
"""
from amaranth import C, Cat, Mux

from ...errors import ParameterError
from ...spec.fp import BF16, FP16, FP32
from .stages import run_steps

__all__ = ["MULTIPLY_STEPS", "multiply_cuts", "fp_multiply"]

#: Names of the multiplier's steps, in order.
MULTIPLY_STEPS = ("unpack_multiply", "normalise_pack")


def multiply_cuts(stages):
    """Indices of the steps followed by a register when the multiplier has ``stages`` register stages (0 to 2)."""
    if not 0 <= stages <= len(MULTIPLY_STEPS):
        raise ParameterError(f"the FP multiplier has 0 to {len(MULTIPLY_STEPS)} register stages, not {stages}")
    return {0: (), 1: (1,), 2: (0, 1)}[stages]


def _unpack(bits, fmt):
    exponent = bits[fmt.fraction_bits:fmt.fraction_bits + fmt.exponent_bits]
    fraction = bits[:fmt.fraction_bits]
    top = exponent == fmt.exponent_max_field
    return {"sign": bits[fmt.width - 1], "exponent": exponent, "fraction": fraction,
            "zero": exponent == 0, "inf": top & (fraction == 0), "nan": top & (fraction != 0)}


def _steps(fmt):
    fraction_bits = fmt.fraction_bits

    def unpack_multiply(values):
        a, b = _unpack(values["a"], fmt), _unpack(values["b"], fmt)
        # FP32 exponent field before the product's carry: the unbiased sum plus FP32's bias, 11-bit signed.
        field = Cat(a["exponent"] + b["exponent"], C(0, 2)).as_signed() + (FP32.bias - 2 * fmt.bias)
        return {
            "sign": a["sign"] ^ b["sign"],
            "exponent_sum": a["exponent"] + b["exponent"],
            # Underflow and overflow of the field for either carry, beside the significand product (so that
            # normalise_pack only selects by the carry).
            "tiny": Cat(field <= 0, field <= -1),
            "huge": Cat(field >= FP32.exponent_max_field, field >= FP32.exponent_max_field - 1),
            "product": Cat(a["fraction"], C(1, 1)) * Cat(b["fraction"], C(1, 1)),
            "zero": a["zero"] | b["zero"],
            "inf": a["inf"] | b["inf"],
            "invalid": a["nan"] | b["nan"] | (a["inf"] & b["zero"]) | (b["inf"] & a["zero"]),
            "active": values["active"],
        }

    def normalise_pack(values):
        product, sign = values["product"], values["sign"]
        carry = product[2 * fraction_bits + 1]
        fraction = Mux(carry,
                       Cat(C(0, FP32.fraction_bits - 2 * fraction_bits - 1), product[:2 * fraction_bits + 1]),
                       Cat(C(0, FP32.fraction_bits - 2 * fraction_bits), product[:2 * fraction_bits]))
        # FP32 exponent field: unbiased sum plus FP32's bias and the carry (its low 8 bits are all pack needs).
        field = values["exponent_sum"] + (FP32.bias - 2 * fmt.bias) + carry
        signed_zero = Cat(C(0, FP32.width - 1), sign)
        infinity = Cat(C(0, FP32.fraction_bits), C(FP32.exponent_max_field, FP32.exponent_bits), sign)
        result = Cat(fraction, field[:FP32.exponent_bits], sign)
        result = Mux(Mux(carry, values["tiny"][1], values["tiny"][0]), signed_zero, result)
        result = Mux(Mux(carry, values["huge"][1], values["huge"][0]), infinity, result)
        result = Mux(values["zero"], signed_zero, result)
        result = Mux(values["inf"], infinity, result)
        result = Mux(values["invalid"], FP32.canonical_nan(), result)
        return {"product": Mux(values["active"], result, 0)}

    return (unpack_multiply, normalise_pack)


def fp_multiply(m, a, b, fmt, stages, enable=1, active=1, name="fp_mul"):
    """The exact FP32 product of two FP16 or two BF16 operands, after ``stages`` clock-enabled register stages.

    Parameters
    ----------
    m : Module or None
        Where the registers go (``None`` when ``stages`` is 0).
    a, b : Value
        Operand bit patterns of ``fmt`` (16 bits each).
    fmt : FloatFormat
        :data:`~trainforge.spec.fp.FP16` or :data:`~trainforge.spec.fp.BF16`.
    stages : int
        Register stages, 0 to 2 (the last one holds the product; with 2 the
        significand product is registered too).
    enable : Value-castable
        Clock enable of the registers.
    active : Value-castable
        Low for an idle lane: the product is then FP32 ``+0`` whatever the operands.
    name : str
        Prefix of the register names.

    Returns
    -------
    Value
        The 32-bit FP32 product.
    """
    if fmt not in (FP16, BF16):
        raise ParameterError(f"fmt must be FP16 or BF16, not {getattr(fmt, 'name', fmt)!r}")
    values = run_steps(m, _steps(fmt), {"a": a, "b": b, "active": active}, multiply_cuts(stages), enable, name)
    return values["product"]
