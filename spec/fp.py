"""Floating-point formats and arithmetic rules shared by the FP hardware and its golden models.

TensorDash multiplies in FP16 (or bfloat16) and accumulates in FP32;
CATERPILLAR computes in half precision. The formats and the rules below are
the contract between those datapaths (``trainforge.hw``) and their bit-level
golden models (:mod:`trainforge.golden.fp`).

Rules
-----
Subnormals (:data:`SUBNORMALS`)
    Flush to zero, on input and on output. An operand whose exponent field is
    0 is a zero of its own sign (a subnormal operand becomes ``+0`` or ``-0``;
    ``-0.0`` counts as zero). A result whose exponent, after rounding, is
    below the format's smallest normal exponent becomes a zero of the
    result's sign. Most ML datapaths do this: no subnormal hardware (no
    leading-zero count on inputs, no denormalising shifter on outputs).
Rounding (:data:`ROUNDING`)
    Round to nearest, ties to even, on the exact result (for an addition
    computed with guard, round and sticky bits). A finite result whose
    rounded magnitude reaches ``2 ** (max exponent + 1)`` overflows to an
    infinity of its sign.
NaN and infinity (IEEE 754)
    Any NaN operand (quiet or signalling) gives the canonical quiet NaN
    (:meth:`FloatFormat.canonical_nan`: sign 0, exponent all ones, only the
    top fraction bit set); ``Inf - Inf`` and ``Inf * 0`` give it too.
    ``Inf + finite`` is that infinity, ``Inf * nonzero`` is an infinity whose
    sign is the XOR of the operand signs.
Signs of zeros (IEEE 754, round to nearest)
    ``x + (-x)`` is ``+0``; ``(-0) + (-0)`` is ``-0``; ``(+0) + (-0)`` is
    ``+0``; a product's sign is always the XOR of the operand signs (also for
    zeros and flushed results).
"""
from dataclasses import dataclass

__all__ = ["FloatFormat", "FP16", "BF16", "FP32", "FORMATS", "SUBNORMALS", "ROUNDING"]

#: Subnormal policy of every FP datapath: flush to zero on input and on output (sign kept).
SUBNORMALS = "flush to zero"

#: Rounding mode of every FP datapath: round to nearest, ties to even.
ROUNDING = "nearest, ties to even"


@dataclass(frozen=True)
class FloatFormat:
    """A binary IEEE-754-style format: sign bit, exponent field, fraction field (MSB to LSB).

    Parameters
    ----------
    name : str
        Short name (``"fp16"``, ``"bf16"``, ``"fp32"``).
    exponent_bits : int
        Width of the biased exponent field.
    fraction_bits : int
        Width of the stored fraction (the significand without its hidden leading one).
    """
    name: str
    exponent_bits: int
    fraction_bits: int

    @property
    def width(self):
        """Total width in bits: sign, exponent, fraction."""
        return 1 + self.exponent_bits + self.fraction_bits

    @property
    def significand_bits(self):
        """Precision of a normal number: the fraction plus the hidden one."""
        return self.fraction_bits + 1

    @property
    def bias(self):
        """Exponent bias: the field of ``1.0``."""
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def exponent_max_field(self):
        """The all-ones exponent field (infinities and NaNs)."""
        return (1 << self.exponent_bits) - 1

    @property
    def min_normal_exponent(self):
        """Unbiased exponent of the smallest normal number (field 1)."""
        return 1 - self.bias

    @property
    def max_exponent(self):
        """Unbiased exponent of the largest finite number (field all ones minus one)."""
        return self.exponent_max_field - 1 - self.bias

    @property
    def sign_mask(self):
        return 1 << (self.width - 1)

    @property
    def exponent_mask(self):
        return self.exponent_max_field << self.fraction_bits

    @property
    def fraction_mask(self):
        return (1 << self.fraction_bits) - 1

    def canonical_nan(self):
        """Bits of the canonical quiet NaN: sign 0, exponent all ones, top fraction bit only."""
        return self.exponent_mask | (1 << (self.fraction_bits - 1))

    def infinity(self, negative=False):
        """Bits of ``+Inf`` (or ``-Inf``)."""
        return self.exponent_mask | (self.sign_mask if negative else 0)

    def max_finite(self, negative=False):
        """Bits of the largest finite magnitude (with the given sign)."""
        return ((self.exponent_max_field - 1) << self.fraction_bits) | self.fraction_mask \
            | (self.sign_mask if negative else 0)


#: IEEE binary16: 5-bit exponent (bias 15), 10-bit fraction.
FP16 = FloatFormat("fp16", exponent_bits=5, fraction_bits=10)
#: bfloat16: FP32's 8-bit exponent (bias 127) with a 7-bit fraction (the top half of an FP32 word).
BF16 = FloatFormat("bf16", exponent_bits=8, fraction_bits=7)
#: IEEE binary32: 8-bit exponent (bias 127), 23-bit fraction.
FP32 = FloatFormat("fp32", exponent_bits=8, fraction_bits=23)

#: The formats by name.
FORMATS = {fmt.name: fmt for fmt in (FP16, BF16, FP32)}
