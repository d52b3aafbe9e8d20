"""The FP32 adder (round to nearest even, flush to zero) as steps that can be cut into register stages.

The steps and their order are those of :func:`trainforge.golden.fp.fp32_add`
(policy: :mod:`trainforge.spec.fp`):

Step 0, ``swap``
    Unpack and classify both operands; the larger magnitude (compared as the
    31-bit exponent-and-fraction field) goes first; exponent difference;
    the flags of the specials (NaN, Inf, zero operands), decided here and
    carried along with the larger operand; the position of the smaller significand's lowest one bit
    (a trailing-zero count of each operand, beside the comparison).
Step 1, ``align``
    Extend the smaller significand by guard, round and sticky bits and shift
    it right by the exponent difference (27 or more apart: nothing kept).
    The sticky bit, the OR of the bits shifted out, is whether that lowest
    one bit lies below the difference: a comparison beside the shifter.
Step 2, ``add``
    Add, or subtract when the signs differ (one adder with a carry-in).
Step 3, ``count``
    A carry out shifts right by one (into sticky, exponent + 1); leading-zero
    count of the 27-bit sum (a tree of priority encoders).
Step 4, ``normalise``
    Shift left by the count, exponent minus the count.
Step 5, ``round``
    Round to nearest even on guard/round/sticky; a rounding carry renormalises
    (exponent + 1); the overflow (field >= 255) and underflow (field <= 0)
    checks of both outcomes are made beside the rounding adder.
Step 6, ``pack``
    Overflow -> Inf, underflow -> signed zero (output flush), exact
    cancellation -> ``+0``; the specials override: NaN, a zero signed by
    both operands when both are zero, else the larger operand unchanged
    (the other is a zero, or it is an Inf).

With 0 stages the adder is one combinational block; :func:`add_cuts` says
where the registers of a pipelined adder go (``register_sum=False`` leaves
out the last one, for the interleaved accumulator, whose partial sums are
that register).
"""
from amaranth import C, Cat, Mux

from ...errors import ParameterError
from ...spec.fp import FP32
from .stages import run_steps

__all__ = ["ADD_STEPS", "add_cuts", "fp32_add"]

#: Names of the adder's steps, in order.
ADD_STEPS = ("swap", "align", "add", "count", "normalise", "round", "pack")

#: Steps followed by a register, by the number of register stages (the last stage always holds the sum).
_CUTS = {0: (), 1: (6,), 2: (2, 6), 3: (1, 4, 6), 4: (0, 2, 4, 6), 5: (0, 1, 2, 4, 6),
         6: (0, 1, 2, 3, 4, 6), 7: (0, 1, 2, 3, 4, 5, 6)}

#: What swap decides of the specials, carried to pack (which builds their result).
SPECIALS = ("special", "invalid", "both_zero", "zero_sign", "big_magnitude")

#: Guard, round and sticky bits below the 24-bit significand.
GRS_BITS = 3
#: Width of an aligned significand: 24 bits and guard/round/sticky.
EXTENDED_BITS = FP32.significand_bits + GRS_BITS


def add_cuts(stages):
    """Indices of the steps followed by a register when the adder has ``stages`` register stages (0 to 7)."""
    if stages not in _CUTS:
        raise ParameterError(f"the FP32 adder has 0 to {len(ADD_STEPS)} register stages, not {stages}")
    return _CUTS[stages]


def _unpack(bits):
    exponent = bits[FP32.fraction_bits:FP32.fraction_bits + FP32.exponent_bits]
    fraction = bits[:FP32.fraction_bits]
    top = exponent == FP32.exponent_max_field
    return {"sign": bits[FP32.width - 1], "zero": exponent == 0,
            "inf": top & (fraction == 0), "nan": top & (fraction != 0)}


def _leading_zeros(bits):
    """(all zero, count of leading zeros) of ``bits`` (a power-of-two width of at least 2), as a balanced tree."""
    width = len(bits)
    if width == 2:
        return ~(bits[0] | bits[1]), ~bits[1]
    low_zero, low_count = _leading_zeros(bits[:width // 2])
    high_zero, high_count = _leading_zeros(bits[width // 2:])
    return low_zero & high_zero, Mux(high_zero, Cat(low_count, C(1, 1)), Cat(high_count, C(0, 1)))


def swap(values):
    a, b = values["a"], values["b"]
    ua, ub = _unpack(a), _unpack(b)
    exchange = a[:FP32.width - 1] < b[:FP32.width - 1]
    big, small = Mux(exchange, b, a), Mux(exchange, a, b)
    exponent_a = a[FP32.fraction_bits:FP32.width - 1]
    exponent_b = b[FP32.fraction_bits:FP32.width - 1]
    exponent_big = big[FP32.fraction_bits:FP32.width - 1]
    # Both differences beside the magnitude comparison; the comparison only selects.
    difference = Mux(exchange, (exponent_b - exponent_a)[:FP32.exponent_bits],
                     (exponent_a - exponent_b)[:FP32.exponent_bits])
    # The specials: NaN; both operands zero (a zero signed by both); else one zero or an Inf, whose result is
    # the operand of larger magnitude as it is (an Inf is above every finite, a zero below every nonzero).
    # Only the flags are decided here; pack builds the result from them and the larger operand.
    invalid = ua["nan"] | ub["nan"] | (ua["inf"] & ub["inf"] & (ua["sign"] ^ ub["sign"]))
    # Where the smaller significand's lowest one bit will sit once extended by guard/round/sticky, from both
    # operands beside the comparison: align's sticky bit is then a comparison, not a shifted-out OR.
    lowest = Mux(exchange, _lowest_one(a), _lowest_one(b))
    return {
        "sign": big[FP32.width - 1],
        "subtract": ua["sign"] ^ ub["sign"],
        "exponent": exponent_big,
        "difference": difference,
        "big": Cat(big[:FP32.fraction_bits], C(1, 1)),
        "small": Cat(small[:FP32.fraction_bits], C(1, 1)),
        "special": ua["zero"] | ub["zero"] | ua["inf"] | ub["inf"] | invalid,
        "invalid": invalid,
        "both_zero": ua["zero"] & ub["zero"],
        "zero_sign": ua["sign"] & ub["sign"],
        "big_magnitude": big[:FP32.width - 1],
        "lowest": lowest,
    }


def _lowest_one(bits):
    """Position of the lowest one bit of the 24-bit significand of FP32 ``bits`` (hidden one included),
    counted in the 27-bit extended significand: the trailing zeros of the fraction plus the 3 GRS bits."""
    significand = Cat(bits[:FP32.fraction_bits], C(1, 1))
    # Leading zeros of the bit-reversed significand, padded below with ones to 32 bits: its trailing zeros.
    _, trailing = _leading_zeros(Cat(C(0xFF, 32 - FP32.significand_bits), *reversed(list(significand))))
    return trailing + GRS_BITS


def align(values):
    # From 27 on nothing is kept; the shifter takes the difference's low 5 bits and a 'far' zeroing.
    difference = values["difference"]
    small = Cat(C(0, GRS_BITS), values["small"])
    far = difference >= EXTENDED_BITS
    shifted = Mux(far, 0, (small >> difference[:5])[:EXTENDED_BITS])
    # Some one bit is shifted out exactly when the lowest one bit lies below the difference.
    sticky = values["lowest"] < difference
    out = {key: values[key] for key in ("sign", "subtract", "exponent", "big", *SPECIALS)}
    out["aligned"] = Cat(shifted[0] | sticky, shifted[1:])
    return out


def add(values):
    width = EXTENDED_BITS + 1
    subtract = values["subtract"]
    big = Cat(C(0, GRS_BITS), values["big"], C(0, 1))
    small = Cat(values["aligned"], C(0, 1)) ^ subtract.replicate(width)
    # One adder: the low bit pair (subtract, subtract) is the carry-in of a two's complement subtraction.
    total = (Cat(subtract, big) + Cat(subtract, small))[1:width + 1]
    out = {key: values[key] for key in ("sign", "exponent", *SPECIALS)}
    out["total"] = total
    return out


def count(values):
    total = values["total"]
    carry = total[EXTENDED_BITS]
    value = Mux(carry, Cat(total[0] | total[1], total[2:EXTENDED_BITS + 1]), total[:EXTENDED_BITS])
    # The count of the sum without its carry bit, beside the carry's selection (a carry means no left shift).
    # Padded to 32 bits with ones below: a zero sum counts 27 (it is overridden by the cancellation rule).
    all_zero, leading = _leading_zeros(Cat(C(0b11111, 32 - EXTENDED_BITS), total[:EXTENDED_BITS]))
    out = {key: values[key] for key in ("sign", *SPECIALS)}
    out.update(value=value, shift=Mux(carry, 0, leading), cancelled=total == 0,
               exponent=Cat(values["exponent"], C(0, 3)).as_signed() + carry)
    return out


def normalise(values):
    out = {key: values[key] for key in ("sign", *SPECIALS, "cancelled")}
    # Shift by the count's bits from the top one down: the top bits of a leading-zero count are known first.
    value, shift = values["value"], values["shift"]
    for bit in reversed(range(len(shift))):
        value = Mux(shift[bit], (value << (1 << bit))[:EXTENDED_BITS], value)
    out["value"] = value
    out["exponent"] = values["exponent"] - values["shift"]
    return out


def round_(values):
    value, exponent = values["value"], values["exponent"]
    low, kept = value[:GRS_BITS], value[GRS_BITS:]
    up = (low > 0b100) | ((low == 0b100) & kept[0])
    significand = kept + up
    carry = significand[FP32.significand_bits]
    # A rounding carry (1.11...1 + ulp) gives fraction 0 and exponent + 1; the exponent's checks for both
    # cases are made beside the rounding adder, and the carry only selects.
    out = {key: values[key] for key in ("sign", *SPECIALS, "cancelled")}
    out["fraction"] = significand[:FP32.fraction_bits]      # 0 after a rounding carry: 1.11...1 + ulp = 10.00...0
    out["field"] = Mux(carry, (exponent + 1)[:FP32.exponent_bits], exponent[:FP32.exponent_bits])
    out["tiny"] = Mux(carry, exponent < 0, exponent <= 0)
    out["overflow"] = Mux(carry, exponent >= FP32.exponent_max_field - 1, exponent >= FP32.exponent_max_field)
    return out


def pack(values):
    # One choice among five results, made by flags that are all known before the rounding carry but
    # overflow and tiny (one level behind it), so that each output bit is an AND-OR of two or three terms.
    sign, special, cancelled = values["sign"], values["special"], values["cancelled"]
    ordinary = ~special & ~cancelled
    overflow = ordinary & values["overflow"]                # Inf of the sign
    tiny = ordinary & ~values["overflow"] & values["tiny"]  # zero of the sign
    normal = ordinary & ~values["overflow"] & ~values["tiny"]
    # The specials: NaN; both zero: a zero signed by both; else the larger operand as it is.
    nan, both_zero = values["invalid"], ~values["invalid"] & values["both_zero"]
    larger = special & ~values["invalid"] & ~values["both_zero"]
    magnitude = values["big_magnitude"]
    nan_bits = FP32.canonical_nan()
    fraction = Cat(*((normal & values["fraction"][bit]) | (larger & magnitude[bit])
                     | (special & nan & C((nan_bits >> bit) & 1, 1)) for bit in range(FP32.fraction_bits)))
    field = Cat(*((normal & values["field"][bit]) | overflow | (larger & magnitude[FP32.fraction_bits + bit])
                  | (special & nan)
                  for bit in range(FP32.exponent_bits)))
    result_sign = ((normal | overflow | tiny | larger) & sign) | (special & both_zero & values["zero_sign"])
    return {"sum": Cat(fraction, field, result_sign)}


#: The step functions, in the order of :data:`ADD_STEPS`.
STEPS = (swap, align, add, count, normalise, round_, pack)


def fp32_add(m, a, b, stages, enable=1, name="fp32_add", register_sum=True):
    """``a + b`` in FP32 after ``stages`` clock-enabled register stages (0: combinational).

    Parameters
    ----------
    m : Module or None
        Where the registers and the named results of the steps go. ``None``
        is allowed with 0 stages but gives one very large expression tree
        (every use of a step's result repeats it): pass a module.
    a, b : Value
        FP32 bit patterns (32 bits each).
    stages : int
        Register stages, 0 to 7 (:func:`add_cuts`); the last one holds the sum.
    enable : Value-castable
        Clock enable of the registers.
    name : str
        Prefix of the register names.
    register_sum : bool
        ``False`` leaves out the last stage's register (the one that holds
        the sum): the sum is then combinational after ``stages - 1``
        registers, for a caller that registers it itself (the interleaved
        accumulator writes it into one of its partial sums).

    Returns
    -------
    Value
        The 32-bit FP32 sum.
    """
    cuts = add_cuts(stages)
    if not register_sum:
        cuts = cuts[:-1]
    return run_steps(m, STEPS, {"a": a, "b": b}, cuts, enable, name)["sum"]
