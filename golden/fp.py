"""Bit-level golden models of the FP multiplier, the FP32 adder and the FP32 adder tree.

Every function works on integer bit patterns (numpy ``uint16``/``uint32``
arrays, vectorised elementwise) and performs the hardware's steps in the
hardware's order, with the rules of :mod:`trainforge.spec.fp` (flush to zero
on input and output, round to nearest even, canonical quiet NaN). numpy's
float arithmetic is never used for a result here: it is the oracle that
``verif/test_fp_golden.py`` checks these models against.

Multiplier (:func:`fp_mul_exact`), FP16 x FP16 or BF16 x BF16 -> FP32
    1. Unpack sign, exponent field, fraction; an exponent field of 0 is a zero
       (input flush).
    2. Sign = XOR of the signs; exponent = sum of the unbiased exponents.
    3. Multiply the significands (hidden one included): 11 x 11 -> 22 bits
       (FP16) or 8 x 8 -> 16 bits (BF16). Both fit FP32's 24-bit significand,
       so the product is exact: no rounding step.
    4. Normalise: the product of two values in [1, 2) lies in [1, 4); if its
       top bit is set, exponent + 1. Left-align to 24 bits.
    5. Range: FP16 products (2**-28 .. < 2**32) are always normal FP32
       numbers. BF16 has FP32's exponent range, so a product may overflow
       (exponent > 127 -> Inf of its sign) or be tiny (exponent < -126 ->
       flushed to a zero of its sign, even where IEEE would give an exact or
       rounded subnormal).
    6. Specials override: NaN operand, or Inf x 0 -> canonical NaN; Inf x
       nonzero -> Inf; zero x finite -> signed zero.

Adder (:func:`fp32_add`), FP32 + FP32 -> FP32
    1. Unpack; flush subnormal operands to signed zeros.
    2. Swap so that ``a`` has the larger magnitude (exponent, then fraction).
    3. Align: extend both 24-bit significands by 3 bits (guard, round,
       sticky); shift the smaller one right by the exponent difference,
       ORing every bit shifted past the sticky position into the sticky bit
       (a difference above 26 leaves only the sticky bit).
    4. Add the significands, or subtract the smaller from the larger when the
       signs differ. The result takes the larger operand's sign; an exact
       zero difference is ``+0``.
    5. Normalise: a carry out shifts right by 1 (the shifted-out bit ORed into
       sticky, exponent + 1); otherwise a leading-zero count shifts left
       (exponent - count) with a 16/8/4/2/1 shifter.
    6. Round to nearest even on guard/round/sticky; a carry out of the
       rounding renormalises (exponent + 1).
    7. Pack: exponent field >= 255 -> Inf of the sign; field <= 0 -> zero of
       the sign (output flush).
    8. Specials override: NaN operand or Inf + (-Inf) -> canonical NaN;
       Inf + anything else -> that Inf; both operands zero -> ``-0`` only if
       both are ``-0``; one zero -> the other operand.

Accumulation (:func:`fp32_accumulate`), the MAC's interleaved accumulator
    ``partials`` partial sums (the PE's ``partial_sums``, :data:`trainforge.spec.mac.PARTIAL_SUMS`).
    The rows since the last ``clear`` (included; reset counts as a clear) are
    numbered ``j = 0, 1, ...``; row ``j`` updates partial ``j mod partials``
    by one :func:`fp32_add`, ``partial + row_sum``, where a partial's first
    row after the clear adds to ``+0`` (so a lone row sum of ``-0`` gives
    ``+0``). The value after a row is :func:`fp32_sum_tree` over the partials,
    a partial not yet written since the clear taken as ``+0``. With one
    partial this is the plain accumulator ``(+0 if clear else acc) + row_sum``.

Format steps (:func:`fp16_to_fp32`, :func:`fp32_scale_down`, :func:`fp32_to_fp16`), CATERPILLAR's FP16 write-back
    Widening FP16 -> FP32 is exact (input flush). Scaling by ``2**-shift`` lowers the
    exponent field, exactly, or flushes a result below FP32's normals. Rounding FP32
    -> FP16 keeps 11 significand bits, rounds to nearest even on the 13 dropped ones,
    renormalises a rounding carry, and then overflows to Inf (field >= 31) or flushes
    (field <= 0: the *rounded* value is below ``2**-14``); NaN -> ``0x7E00``.

Adder tree (:func:`fp32_sum_tree`)
    Level by level, lanes ``0+1, 2+3, ...``; an odd lane left over at the end
    of a level passes to the next level unchanged (as its last lane). Each
    level repeats this on the previous level's sums until one value is left.
"""
import numpy as np

from trainforge.errors import ParameterError
from trainforge.spec.fp import BF16, FP16, FP32

__all__ = ["fp_mul_exact", "fp32_add", "fp32_sum_tree", "fp32_accumulate", "fp16_to_fp32", "fp32_scale_down",
           "fp32_to_fp16", "to_bits", "from_bits"]

#: Guard, round and sticky bits below the adder's 24-bit significand.
GRS_BITS = 3


def _unpack(bits, fmt):
    """(sign, exponent field, fraction) as int64 arrays."""
    bits = np.asarray(bits).astype(np.int64)
    sign = (bits >> (fmt.width - 1)) & 1
    exponent = (bits >> fmt.fraction_bits) & fmt.exponent_max_field
    fraction = bits & fmt.fraction_mask
    return sign, exponent, fraction


def _classify(exponent, fraction, fmt):
    """(is zero after input flush, is infinity, is NaN)."""
    top = exponent == fmt.exponent_max_field
    return exponent == 0, top & (fraction == 0), top & (fraction != 0)


def _pack(sign, exponent_field, fraction, fmt=FP32):
    return ((sign << (fmt.width - 1)) | (exponent_field << fmt.fraction_bits) | fraction).astype(np.uint32)


def _check_bits(bits, fmt, name):
    array = np.asarray(bits)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array of {fmt.name} bit patterns, not {array.dtype}")
    if array.size and (array.min() < 0 or int(array.max()) >> fmt.width):
        raise ParameterError(f"{name} has values outside 0..2**{fmt.width}-1: not {fmt.name} bit patterns")
    return array


def fp_mul_exact(a_bits, b_bits, fmt):
    """The exact product of two FP16 or two BF16 operands, as FP32 bits.

    Parameters
    ----------
    a_bits, b_bits : array_like of int
        Operand bit patterns of ``fmt`` (broadcast together).
    fmt : FloatFormat
        :data:`~trainforge.spec.fp.FP16` or :data:`~trainforge.spec.fp.BF16`.

    Returns
    -------
    numpy.ndarray of uint32
        FP32 bit patterns of the products (see the module docstring for the steps).
    """
    if fmt not in (FP16, BF16):
        raise ParameterError(f"fmt must be FP16 or BF16 (an exact product in FP32), not {getattr(fmt, 'name', fmt)!r}")
    a_bits, b_bits = _check_bits(a_bits, fmt, "a_bits"), _check_bits(b_bits, fmt, "b_bits")
    sign_a, exp_a, frac_a = _unpack(a_bits, fmt)
    sign_b, exp_b, frac_b = _unpack(b_bits, fmt)
    zero_a, inf_a, nan_a = _classify(exp_a, frac_a, fmt)
    zero_b, inf_b, nan_b = _classify(exp_b, frac_b, fmt)
    sign = sign_a ^ sign_b

    # Significand product: 2 * significand_bits wide, value in [1, 4) scaled by 2**(2 * fraction_bits).
    hidden = 1 << fmt.fraction_bits
    product = (hidden | frac_a) * (hidden | frac_b)
    carry = (product >> (2 * fmt.fraction_bits + 1)) & 1
    exponent = (exp_a - fmt.bias) + (exp_b - fmt.bias) + carry
    # Left-align the leading one at bit 23 (FP32's hidden bit): exact, since 2 * significand_bits <= 24.
    significand = product << (FP32.fraction_bits - 2 * fmt.fraction_bits - carry)

    field = exponent + FP32.bias
    overflow = field >= FP32.exponent_max_field
    tiny = field <= 0
    result = _pack(sign, np.clip(field, 0, FP32.exponent_max_field), significand & FP32.fraction_mask)
    result = np.where(tiny, _pack(sign, 0, 0), result)
    result = np.where(overflow, _pack(sign, FP32.exponent_max_field, 0), result)

    result = np.where(zero_a | zero_b, _pack(sign, 0, 0), result)
    result = np.where(inf_a | inf_b, _pack(sign, FP32.exponent_max_field, 0), result)
    invalid = nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)
    return np.where(invalid, np.uint32(FP32.canonical_nan()), result).astype(np.uint32)


def _shift_right_sticky(value, distance, width):
    """``value >> distance`` with every bit shifted out ORed into bit 0 (``value`` has ``width`` bits)."""
    distance = np.minimum(distance, width)
    lost = (value & ((np.int64(1) << distance) - 1)) != 0
    return (value >> distance) | lost.astype(np.int64)


def _normalise_left(value, top):
    """Shift ``value`` (nonzero, below ``2 ** (top + 1)``) left until bit ``top`` is set: (value, shift)."""
    shift = np.zeros_like(value)
    for step in (16, 8, 4, 2, 1):
        short = value < (np.int64(1) << (top + 1 - step))
        value = np.where(short, value << step, value)
        shift = shift + np.where(short, step, 0)
    return value, shift


def _round_nearest_even(extended):
    """Round a significand with guard/round/sticky bits (``GRS_BITS`` low bits) to nearest, ties to even."""
    low = extended & ((1 << GRS_BITS) - 1)
    kept = extended >> GRS_BITS
    halfway = 1 << (GRS_BITS - 1)
    up = (low > halfway) | ((low == halfway) & ((kept & 1) == 1))
    return kept + up.astype(np.int64)


def fp32_add(a_bits, b_bits):
    """``a + b`` in FP32, rounded to nearest even, subnormals flushed to zero.

    Parameters
    ----------
    a_bits, b_bits : array_like of int
        FP32 bit patterns (broadcast together).

    Returns
    -------
    numpy.ndarray of uint32
        FP32 bit patterns of the sums (see the module docstring for the steps).
    """
    a_bits, b_bits = _check_bits(a_bits, FP32, "a_bits"), _check_bits(b_bits, FP32, "b_bits")
    a_bits, b_bits = np.broadcast_arrays(a_bits.astype(np.int64), b_bits.astype(np.int64))
    sign_a, exp_a, frac_a = _unpack(a_bits, FP32)
    sign_b, exp_b, frac_b = _unpack(b_bits, FP32)
    zero_a, inf_a, nan_a = _classify(exp_a, frac_a, FP32)
    zero_b, inf_b, nan_b = _classify(exp_b, frac_b, FP32)

    # Swap: the larger magnitude first (exponent field, then fraction = the 31-bit magnitude).
    swap = (a_bits & 0x7FFFFFFF) < (b_bits & 0x7FFFFFFF)
    sign_big, sign_small = np.where(swap, sign_b, sign_a), np.where(swap, sign_a, sign_b)
    exp_big, exp_small = np.where(swap, exp_b, exp_a), np.where(swap, exp_a, exp_b)
    frac_big, frac_small = np.where(swap, frac_b, frac_a), np.where(swap, frac_a, frac_b)

    # Align with guard/round/sticky.
    hidden = 1 << FP32.fraction_bits
    big = (hidden | frac_big) << GRS_BITS
    small = _shift_right_sticky((hidden | frac_small) << GRS_BITS, exp_big - exp_small,
                                FP32.significand_bits + GRS_BITS)

    # Add or subtract (effective subtraction when the signs differ); the larger operand's sign.
    subtract = sign_big != sign_small
    total = np.where(subtract, big - small, big + small)
    cancelled = total == 0

    # Normalise: bit TOP is the hidden one of the result.
    top = FP32.fraction_bits + GRS_BITS
    carry = (total >> (top + 1)) & 1
    exponent = exp_big + carry
    total = np.where(carry == 1, _shift_right_sticky(total, 1, top + 2), total)
    total, shift = _normalise_left(np.where(cancelled, 1 << top, total), top)
    exponent = exponent - shift

    # Round, then renormalise a rounding carry (1.11...1 + ulp = 10.0...0).
    significand = _round_nearest_even(total)
    round_carry = significand >> FP32.significand_bits
    significand = significand >> round_carry
    exponent = exponent + round_carry

    # Pack with overflow to Inf and output flush to zero.
    result = _pack(sign_big, np.clip(exponent, 0, FP32.exponent_max_field), significand & FP32.fraction_mask)
    result = np.where(exponent <= 0, _pack(sign_big, 0, 0), result)
    result = np.where(exponent >= FP32.exponent_max_field, _pack(sign_big, FP32.exponent_max_field, 0), result)
    result = np.where(cancelled, _pack(np.zeros_like(sign_big), 0, 0), result)

    # Specials.
    result = np.where(zero_b & ~zero_a, a_bits, result)
    result = np.where(zero_a & ~zero_b, b_bits, result)
    result = np.where(zero_a & zero_b, _pack(sign_a & sign_b, 0, 0), result)
    result = np.where(inf_a, a_bits, result)
    result = np.where(inf_b, b_bits, result)
    invalid = nan_a | nan_b | (inf_a & inf_b & (sign_a != sign_b))
    return np.where(invalid, FP32.canonical_nan(), result).astype(np.uint32)


def fp32_sum_tree(values_bits, axis=-1):
    """The FP32 sum of ``values_bits`` along ``axis`` by the PE's pairwise adder tree.

    Parameters
    ----------
    values_bits : array_like of int
        FP32 bit patterns; ``axis`` holds the lanes (at least one).
    axis : int
        The lane axis.

    Returns
    -------
    numpy.ndarray of uint32
        The sums, ``values_bits`` without ``axis``. Each level adds lanes
        ``0+1, 2+3, ...`` with :func:`fp32_add`; an odd last lane passes to the
        next level unchanged.
    """
    level = np.moveaxis(_check_bits(values_bits, FP32, "values_bits"), axis, -1).astype(np.uint32)
    if level.shape[-1] == 0:
        raise ParameterError("values_bits has no lanes along axis: an adder tree needs at least one")
    while level.shape[-1] > 1:
        pairs = level.shape[-1] // 2
        sums = fp32_add(level[..., 0:2 * pairs:2], level[..., 1:2 * pairs:2])
        level = np.concatenate([sums, level[..., 2 * pairs:]], axis=-1)
    return level[..., 0]


def fp32_accumulate(row_sums_bits, clear, partials, read=None):
    """The interleaved accumulator's value after each row (module docstring).

    Parameters
    ----------
    row_sums_bits : array_like of int, shape (rows, ...)
        FP32 bit patterns of the rows' sums; trailing axes are independent
        accumulators sharing the rows' flags (the PEs of a tile).
    clear : array_like of bool, shape (rows,)
        Rows that start a new sum.
    partials : int
        Partial sums of the accumulator (at least 1).
    read : array_like of bool, shape (rows,), optional
        Return the values after these rows only (the others are not summed).

    Returns
    -------
    numpy.ndarray of uint32, shape (rows, ...) or (reads, ...)
        The accumulator's value after each row (or each ``read`` row).
    """
    row_sums_bits = _check_bits(row_sums_bits, FP32, "row_sums_bits").astype(np.uint32)
    clear = np.asarray(clear, dtype=bool)
    if clear.shape != row_sums_bits.shape[:1]:
        raise ParameterError(f"clear has shape {clear.shape}, the row sums {row_sums_bits.shape}")
    if int(partials) < 1:
        raise ParameterError(f"partials must be at least 1, got {partials}")
    read = np.ones(clear.shape, dtype=bool) if read is None else np.asarray(read, dtype=bool)
    if read.shape != clear.shape:
        raise ParameterError(f"read has shape {read.shape}, clear {clear.shape}")
    state = np.zeros((partials,) + row_sums_bits.shape[1:], dtype=np.uint32)
    after = np.zeros((int(read.sum()),) + row_sums_bits.shape[1:], dtype=np.uint32)
    rows_since_clear, out = 0, 0
    for row, row_sum in enumerate(row_sums_bits):
        if clear[row]:
            rows_since_clear = 0
        index = rows_since_clear % partials
        start = state[index] if rows_since_clear >= partials else np.uint32(0)
        state[index] = fp32_add(start, row_sum)
        rows_since_clear += 1
        if read[row]:
            written = (np.arange(partials) < rows_since_clear).reshape((partials,) + (1,) * (state.ndim - 1))
            after[out] = fp32_sum_tree(np.where(written, state, np.uint32(0)), axis=0)
            out += 1
    return after


def fp16_to_fp32(bits):
    """FP16 bit patterns widened to FP32, exactly (input flush: a subnormal becomes a zero of its sign).

    A normal value keeps its sign and fraction (shifted left by 13) and takes the FP32 exponent field
    ``field - 15 + 127``; ``+-Inf`` stays ``+-Inf``; a NaN becomes the canonical FP32 NaN.

    Parameters
    ----------
    bits : array_like of int
        FP16 bit patterns.

    Returns
    -------
    numpy.ndarray of uint32
    """
    sign, exponent, fraction = _unpack(_check_bits(bits, FP16, "bits"), FP16)
    zero, inf, nan = _classify(exponent, fraction, FP16)
    shift = FP32.fraction_bits - FP16.fraction_bits
    result = _pack(sign, exponent - FP16.bias + FP32.bias, fraction << shift)
    result = np.where(zero, _pack(sign, 0, 0), result)
    result = np.where(inf, _pack(sign, FP32.exponent_max_field, 0), result)
    return np.where(nan, np.uint32(FP32.canonical_nan()), result).astype(np.uint32)


def fp32_scale_down(bits, shift):
    """``x * 2**-shift`` of FP32 bit patterns: an exponent decrement, exact, or a flush to zero.

    Steps: an operand with exponent field 0 is a zero of its sign (input flush); ``+-Inf`` stays; a NaN
    becomes the canonical NaN; otherwise the exponent field drops by ``shift`` and a field of 0 or below
    gives a zero of the operand's sign (output flush: the exact result is below FP32's smallest normal).
    The fraction is never rounded.

    Parameters
    ----------
    bits : array_like of int
        FP32 bit patterns.
    shift : int or array_like of int
        At least 0 (broadcast with ``bits``).

    Returns
    -------
    numpy.ndarray of uint32
    """
    bits = _check_bits(bits, FP32, "bits")
    shift = np.asarray(shift, dtype=np.int64)
    if shift.size and shift.min() < 0:
        raise ParameterError(f"shift must be at least 0, got {int(shift.min())}")
    sign, exponent, fraction = _unpack(bits, FP32)
    zero, inf, nan = _classify(exponent, fraction, FP32)
    field = exponent - shift
    result = np.where(field <= 0, _pack(sign, 0, 0), _pack(sign, np.maximum(field, 0), fraction))
    result = np.where(zero, _pack(sign, 0, 0), result)
    result = np.where(inf, _pack(sign, FP32.exponent_max_field, 0), result)
    return np.where(nan, np.uint32(FP32.canonical_nan()), result).astype(np.uint32)


def fp32_to_fp16(bits):
    """FP32 bit patterns rounded to FP16: nearest, ties to even, subnormals flushed on input and output.

    Steps: unpack (exponent field 0: a zero of its sign); keep the 11 top significand bits and round to
    nearest even on the 13 dropped ones (guard = the top dropped bit, sticky = the OR of the 12 others);
    a rounding carry (1.11...1 + ulp) moves the exponent up by one; pack: an FP16 exponent field of 31 or
    more is ``+-Inf`` (overflow), of 0 or less a zero of the sign (the rounded value is below FP16's smallest
    normal, ``2**-14``); ``+-Inf`` stays ``+-Inf``; a NaN gives the canonical FP16 NaN ``0x7E00``.

    Parameters
    ----------
    bits : array_like of int
        FP32 bit patterns.

    Returns
    -------
    numpy.ndarray of uint16
    """
    sign, exponent, fraction = _unpack(_check_bits(bits, FP32, "bits"), FP32)
    zero, inf, nan = _classify(exponent, fraction, FP32)
    dropped_bits = FP32.fraction_bits - FP16.fraction_bits
    significand = (1 << FP32.fraction_bits) | fraction
    kept, dropped = significand >> dropped_bits, significand & ((1 << dropped_bits) - 1)
    halfway = 1 << (dropped_bits - 1)
    up = (dropped > halfway) | ((dropped == halfway) & ((kept & 1) == 1))
    kept = kept + up.astype(np.int64)
    carry = kept >> FP16.significand_bits
    field = exponent - FP32.bias + FP16.bias + carry
    fraction16 = (kept >> carry) & FP16.fraction_mask

    def pack16(field_bits, fraction_bits):
        return (sign << (FP16.width - 1)) | (field_bits << FP16.fraction_bits) | fraction_bits

    result = pack16(np.clip(field, 0, FP16.exponent_max_field), fraction16)
    result = np.where(field <= 0, pack16(0, 0), result)
    result = np.where(field >= FP16.exponent_max_field, pack16(FP16.exponent_max_field, 0), result)
    result = np.where(zero, pack16(0, 0), result)
    result = np.where(inf, pack16(FP16.exponent_max_field, 0), result)
    return np.where(nan, FP16.canonical_nan(), result).astype(np.uint16)


def to_bits(values, fmt):
    """Bit patterns of ``values`` (floats) in ``fmt``, rounded to nearest even from float32 for BF16.

    FP16 and FP32 use numpy's own conversion (``astype``); BF16 rounds the
    float32 bits' low half away on the integers (NaN -> canonical NaN). No
    flush: apply the subnormal policy where the operands enter a datapath.
    """
    if fmt is FP32:
        return np.asarray(values, dtype=np.float32).view(np.uint32)
    if fmt is FP16:
        with np.errstate(over="ignore"):   # beyond FP16's range: +-Inf, as IEEE converts
            return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)
    if fmt is BF16:
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.int64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        nan = (bits & 0x7FFFFFFF) > FP32.exponent_mask
        return np.where(nan, BF16.canonical_nan(), rounded).astype(np.uint16)
    raise ParameterError(f"fmt must be FP16, BF16 or FP32, not {getattr(fmt, 'name', fmt)!r}")


def from_bits(bits, fmt):
    """The float32 values of ``fmt`` bit patterns (exact for all three formats; no flush)."""
    array = np.asarray(bits)
    if fmt is FP32:
        return array.astype(np.uint32).view(np.float32)
    if fmt is FP16:
        return array.astype(np.uint16).view(np.float16).astype(np.float32)
    if fmt is BF16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    raise ParameterError(f"fmt must be FP16, BF16 or FP32, not {getattr(fmt, 'name', fmt)!r}")
