"""The bit-level FP golden models against numpy's IEEE arithmetic (float16/float32, ml_dtypes bfloat16).

The oracle (``verif/fp_oracle.py``): numpy computes the IEEE result (round to
nearest even, with subnormals); the oracle applies the datapath's
flush-to-zero policy itself, on its inputs and outputs (``flush``), written
independently of the golden model. NaN results compare as "is NaN" on the
oracle side; the golden model must give the canonical quiet NaN (0x7FC00000,
a constant of IEEE binary32 written there).
"""
import ml_dtypes
import numpy as np
import pytest

import trainforge.golden.fp as fp_golden
from fp_oracle import describe, flush, mismatches, oracle_add, oracle_mul
from trainforge.errors import ParameterError
from trainforge.golden.fp import fp32_add, fp32_sum_tree, fp_mul_exact, from_bits, to_bits
from trainforge.spec.fp import BF16, FP16, FP32

N = 1_000_000


def random_normals(rng, n, fmt, exponent_low, exponent_high):
    """Bit patterns of normal numbers, random sign and fraction, exponent fields in [low, high]."""
    sign = rng.integers(0, 2, n, dtype=np.int64)
    exponent = rng.integers(exponent_low, exponent_high + 1, n, dtype=np.int64)
    fraction = rng.integers(0, 1 << fmt.fraction_bits, n, dtype=np.int64)
    return (sign << (fmt.width - 1)) | (exponent << fmt.fraction_bits) | fraction


def random_pairs(rng, fmt):
    """N operand pairs: random bit patterns, wide-spread normals, narrow-spread normals (cancellation)."""
    top = (1 << fmt.exponent_bits) - 2
    third = N // 3
    a_random = rng.integers(0, 1 << fmt.width, third, dtype=np.int64)
    b_random = rng.integers(0, 1 << fmt.width, third, dtype=np.int64)
    a_wide = random_normals(rng, third, fmt, 1, top)
    b_wide = random_normals(rng, third, fmt, 1, top)
    rest = N - 2 * third
    a_narrow = random_normals(rng, rest, fmt, 1, top)
    offset = rng.integers(-3, 4, rest)
    b_narrow = random_normals(rng, rest, fmt, 1, top) & ~(((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits)
    b_exponent = np.clip(((a_narrow >> fmt.fraction_bits) & ((1 << fmt.exponent_bits) - 1)) + offset, 1, top)
    b_narrow = b_narrow | (b_exponent << fmt.fraction_bits)
    return (np.concatenate([a_random, a_wide, a_narrow]).astype(np.uint32),
            np.concatenate([b_random, b_wide, b_narrow]).astype(np.uint32))


def f32(value):
    return int(np.float32(value).view(np.uint32))


# (a, b) FP32 corner pairs for the adder; each pair is also tried swapped and with both signs flipped.
ADD_CORNERS = [
    # Zeros.
    (0x00000000, 0x00000000), (0x00000000, 0x80000000), (0x80000000, 0x80000000), (0x80000000, f32(3.5)),
    # Subnormal inputs (flushed): alone, with each other, with a normal, with a zero.
    (0x00000001, 0x00000000), (0x807FFFFF, 0x807FFFFF), (0x00400000, f32(1.0)), (0x80000001, 0x00000001),
    (0x00000001, 0x00800000), (0x807FFFFF, 0x00800000),
    # Results that underflow to subnormal (flushed, sign kept): differences of nearby tiny normals.
    (0x00800001, 0x80800000), (0x80800001, 0x00800000), (0x00FFFFFF, 0x80800000), (0x01000000, 0x80FFFFFF),
    # Largest finite values; overflow to Inf by the sum and by rounding (ties to even at the top).
    (0x7F7FFFFF, 0x7F7FFFFF), (0x7F7FFFFF, 0xFF7FFFFF), (0x7F7FFFFF, f32(2.0 ** 103)),
    (0x7F7FFFFF, f32(2.0 ** 102)), (0x7F7FFFFE, f32(2.0 ** 103)), (0x7F7FFFFF, 0x73000001),
    # Infinities.
    (0x7F800000, f32(1.0)), (0x7F800000, 0x7F800000), (0x7F800000, 0xFF800000), (0x7F800000, 0x00000000),
    (0x7F800000, 0x7F7FFFFF), (0x7F800000, 0x00000001),
    # NaNs: quiet and signalling, with numbers, zeros, infinities and each other.
    (0x7FC00000, f32(1.0)), (0xFFC00001, 0x00000000), (0x7F800001, f32(-2.0)), (0x7FA00000, 0x7F800000),
    (0xFF800001, 0x7FC00000), (0x7FFFFFFF, 0xFF800000),
    # Exact halfway cases: ties to even, rounding down (even) and up (odd), in addition and subtraction.
    (f32(1.0), f32(2.0 ** -24)), (0x3F800001, f32(2.0 ** -24)), (0x3F800003, f32(2.0 ** -24)),
    (f32(2.0), f32(-(2.0 ** -24))), (0x40000001, f32(-(2.0 ** -23))), (f32(2.0 ** 24), f32(1.0)),
    (f32(2.0 ** 24 + 2), f32(1.0)), (f32(1.5), f32(1.5 * 2.0 ** -24)), (0x3FFFFFFF, f32(2.0 ** -23)),
    # Cancellation: a + (-a) = +0 for every rounding direction of the inputs.
    (f32(1.0), f32(-1.0)), (0x7F7FFFFF, 0xFF7FFFFF), (0x00800000, 0x80800000), (0x12345678, 0x92345678),
    # Exponents more than 24 apart: the sticky bit decides.
    (f32(1.0), f32(2.0 ** -30)), (f32(1.0), f32(-(2.0 ** -30))), (f32(1.0), 0xB3000001),
    (f32(1.0), 0xB2800001), (0x3F800001, f32(2.0 ** -26)), (0x3F800001, 0xB3000001),
    (0x7F7FFFFF, 0x00800000), (0x7F7FFFFF, 0x80800000), (f32(2.0 ** 30), 0x80800001),
    # Carries: rounding carry into the exponent, carry out of the significand sum.
    (0x3FFFFFFF, f32(2.0 ** -24)), (0x3FFFFFFF, 0x3FFFFFFF), (0x7F000000, 0x7F000000),
    # One leading zero and many leading zeros after subtraction.
    (0x3F800000, 0xBF7FFFFF), (0x40000000, 0xBFFFFFFF), (0x3FC00001, 0xBFC00000),
]

# Hand-worked (a, b, a + b) FP32 bits, the policy stated without any arithmetic library.
ADD_BY_HAND = [
    (0x00000000, 0x80000000, 0x00000000),   # +0 + -0 = +0
    (0x80000000, 0x80000000, 0x80000000),   # -0 + -0 = -0
    (0x00000001, 0x00000000, 0x00000000),   # subnormal flushed on input
    (0x00800001, 0x80800000, 0x00000000),   # exact 2**-149 is subnormal: flushed, +
    (0x80800001, 0x00800000, 0x80000000),   # exact -2**-149: flushed, sign kept
    (0x3F800000, 0x33800000, 0x3F800000),   # 1 + 2**-24: tie, 1.0 is even -> down
    (0x3F800001, 0x33800000, 0x3F800002),   # (1 + 2**-23) + 2**-24: tie, odd -> up to even
    (0x3F800000, 0xB3000001, 0x3F7FFFFF),   # 1 - (2**-25 + 2**-48): below the tie, sticky -> down
    (0x3F800000, 0xB3000000, 0x3F800000),   # 1 - 2**-25: exact tie, 1.0 even
    (0x7F7FFFFF, 0x73000000, 0x7F800000),   # max + half ulp: tie, odd -> up -> Inf
    (0x7F7FFFFF, 0x72800000, 0x7F7FFFFF),   # max + quarter ulp -> max
    (0x7F800000, 0xFF800000, 0x7FC00000),   # Inf - Inf = NaN
    (0x7F800001, 0x3F800000, 0x7FC00000),   # signalling NaN -> canonical quiet NaN
    (0x3F800000, 0xBF800000, 0x00000000),   # 1 - 1 = +0
    (0x7F000000, 0x7F000000, 0x7F800000),   # 2**127 + 2**127 overflows
]

# (a, b) FP16 corner pairs for the multiplier.
MUL_CORNERS_FP16 = [
    (0x0000, 0x3C00), (0x8000, 0x3C00), (0x8000, 0x8000), (0x0000, 0x7C00), (0x7C00, 0x8000),
    (0x0001, 0x3C00), (0x83FF, 0x4000), (0x0200, 0x7BFF),                  # subnormals flushed
    (0x7BFF, 0x7BFF), (0xFBFF, 0x7BFF), (0x0400, 0x0400), (0x8400, 0x0400),  # extremes stay exact normals
    (0x7C00, 0x3C00), (0x7C00, 0xFC00), (0xFC00, 0x0400),                  # infinities
    (0x7E00, 0x3C00), (0x7C01, 0x3C00), (0xFE01, 0x0000), (0x7D00, 0x7C00),  # quiet/signalling NaNs
    (0x3FFF, 0x3FFF), (0x3C01, 0x3C01), (0x3555, 0x3555),                  # full-width significand products
]

# (a, b) BF16 corner pairs: FP32's exponent range, so products overflow and underflow.
MUL_CORNERS_BF16 = [
    (0x0000, 0x3F80), (0x8000, 0x3F80), (0x8000, 0x8000), (0x0000, 0x7F80), (0x7F80, 0x8000),
    (0x0001, 0x3F80), (0x807F, 0x4000),                                    # subnormals flushed
    (0x7F7F, 0x7F7F), (0xFF7F, 0x3FFF), (0x7F7F, 0x3FFF), (0x5F80, 0x5F80), (0x5F80, 0x5F00),  # overflow
    (0x1F80, 0x1F80), (0x1F80, 0x1F00), (0x9F80, 0x1F00), (0x0080, 0x0080), (0x0080, 0x3F00),  # underflow
    (0x1FFF, 0x1FFF), (0x0080, 0x3F80), (0x0080, 0x3FFF),                  # at/near the smallest normal
    (0x7F80, 0x3F80), (0x7F80, 0xFF80), (0xFF80, 0x0080),                  # infinities
    (0x7FC0, 0x3F80), (0x7F81, 0x3F80), (0xFFC1, 0x0000), (0x7FA0, 0x7F80),  # NaNs
]

# Hand-worked (a, b, a * b) products: FP16 or BF16 operands, FP32 result bits.
MUL_BY_HAND = [
    (FP16, 0x3C00, 0x3C00, 0x3F800000),   # 1 * 1
    (FP16, 0x7BFF, 0x7BFF, 0x4F7FC004),   # 65504**2 = (2**11 - 1)**2 * 2**10 = 4190209 * 2**10 exactly
    (FP16, 0x0400, 0x0400, 0x31800000),   # 2**-14 * 2**-14 = 2**-28
    (FP16, 0x0001, 0x3C00, 0x00000000),   # subnormal operand flushed
    (FP16, 0x8000, 0x3C00, 0x80000000),   # -0 * 1 = -0
    (FP16, 0x7C00, 0x0000, 0x7FC00000),   # Inf * 0 = NaN
    (FP16, 0xFC00, 0x4000, 0xFF800000),   # -Inf * 2 = -Inf
    (BF16, 0x7F7F, 0x7F7F, 0x7F800000),   # overflow -> Inf
    (BF16, 0x1F80, 0x9F80, 0x80000000),   # 2**-64 * -(2**-64) = -2**-128: flushed, sign kept
    (BF16, 0x1F80, 0x2000, 0x00000000),   # 2**-64 * 2**-63 = 2**-127: tiny, flushed
    (BF16, 0x2000, 0x2000, 0x00800000),   # 2**-63 * 2**-63 = 2**-126, the smallest normal, kept
]


def _both_orders(pairs, sign_bit):
    a, b = np.array(pairs, dtype=np.int64).T
    flip = 1 << sign_bit
    a_all = np.concatenate([a, b, a ^ flip, b ^ flip])
    b_all = np.concatenate([b, a, b ^ flip, a ^ flip])
    return a_all, b_all


def test_add_corners():
    a, b = _both_orders(ADD_CORNERS, 31)
    got = fp32_add(a, b)
    expected = oracle_add(a, b)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


def test_add_by_hand():
    a, b, expected = (np.array(column, dtype=np.int64) for column in zip(*ADD_BY_HAND))
    got = fp32_add(a, b)
    assert [hex(x) for x in got] == [hex(x) for x in expected]
    assert [hex(x) for x in fp32_add(b, a)] == [hex(x) for x in expected]


def test_add_random(seed):
    a, b = random_pairs(np.random.default_rng(seed), FP32)
    got = fp32_add(a, b)
    expected = oracle_add(a, b)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


@pytest.mark.parametrize("fmt,corners", [(FP16, MUL_CORNERS_FP16), (BF16, MUL_CORNERS_BF16)], ids=["fp16", "bf16"])
def test_mul_corners(fmt, corners):
    a, b = _both_orders(corners, 15)
    got = fp_mul_exact(a, b, fmt)
    expected = oracle_mul(a, b, fmt)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


def test_mul_by_hand():
    for fmt, a, b, expected in MUL_BY_HAND:
        assert hex(int(fp_mul_exact(a, b, fmt))) == hex(expected), (fmt.name, hex(a), hex(b))


@pytest.mark.parametrize("fmt", [FP16, BF16], ids=["fp16", "bf16"])
def test_mul_random(fmt, seed):
    a, b = random_pairs(np.random.default_rng(seed), fmt)
    got = fp_mul_exact(a, b, fmt)
    expected = oracle_mul(a, b, fmt)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


def test_fp16_products_are_exact(seed):
    """Every FP16 product is exact in FP32: float64 (53 bits) computes the same values."""
    a, b = random_pairs(np.random.default_rng(seed), FP16)
    values_a = flush(a.astype(np.uint16).view(np.float16)).astype(np.float64)
    values_b = flush(b.astype(np.uint16).view(np.float16)).astype(np.float64)
    finite = np.isfinite(values_a) & np.isfinite(values_b)
    got = fp_mul_exact(a, b, FP16).view(np.float32)[finite].astype(np.float64)
    assert np.array_equal(got, values_a[finite] * values_b[finite])


def test_truncating_adder_is_caught(monkeypatch, seed):
    """The oracle is not vacuous: an adder that truncates instead of rounding fails it."""
    def truncate(extended):
        return extended >> fp_golden.GRS_BITS
    monkeypatch.setattr(fp_golden, "_round_nearest_even", truncate)
    a, b = random_pairs(np.random.default_rng(seed), FP32)
    wrong = mismatches(fp32_add(a, b), oracle_add(a, b))
    assert wrong.size > 1000
    a, b, _ = zip(*ADD_BY_HAND)
    assert mismatches(fp32_add(np.array(a), np.array(b)), oracle_add(np.array(a), np.array(b))).size


def test_adder_without_sticky_is_caught(monkeypatch):
    """The sticky corner cases catch an alignment that drops the shifted-out bits."""
    monkeypatch.setattr(fp_golden, "_shift_right_sticky",
                        lambda value, distance, width: value >> np.minimum(distance, width))
    a, b = _both_orders(ADD_CORNERS, 31)
    assert mismatches(fp32_add(a, b), oracle_add(a, b)).size


def test_sum_tree_order(seed):
    """The tree is ((0+1)+(2+3))+((4+5)+(6+7)) for 8 lanes; 5 lanes: ((0+1)+(2+3))+4."""
    rng = np.random.default_rng(seed)
    values = random_normals(rng, (1000, 8), FP32, 100, 154).astype(np.uint32)
    lanes = [values[:, k] for k in range(8)]
    add = fp32_add
    eight = add(add(add(lanes[0], lanes[1]), add(lanes[2], lanes[3])),
                add(add(lanes[4], lanes[5]), add(lanes[6], lanes[7])))
    assert np.array_equal(fp32_sum_tree(values, axis=1), eight)
    assert np.array_equal(fp32_sum_tree(values.T, axis=0), eight)
    five = add(add(add(lanes[0], lanes[1]), add(lanes[2], lanes[3])), lanes[4])
    assert np.array_equal(fp32_sum_tree(values[:, :5], axis=-1), five)
    three = add(add(lanes[0], lanes[1]), lanes[2])
    assert np.array_equal(fp32_sum_tree(values[:, :3]), three)
    assert np.array_equal(fp32_sum_tree(values[:, :1]), lanes[0])


def test_sum_tree_is_not_a_sequential_sum():
    """[2**24, 1, 1, 1]: the tree gives 2**24 + 2, a left-to-right sum loses every 1 (ties to even)."""
    values = np.array([f32(2.0 ** 24), f32(1.0), f32(1.0), f32(1.0)], dtype=np.uint32)
    sequential = values[0]
    for value in values[1:]:
        sequential = fp32_add(sequential, value)
    assert int(sequential) == f32(2.0 ** 24)
    assert int(fp32_sum_tree(values)) == f32(2.0 ** 24 + 2)


@pytest.mark.filterwarnings("error")
def test_conversions_round_trip_and_bf16_rounding(seed):
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000)).astype(np.float32)
    values[:4] = [np.inf, -np.inf, 0.0, -0.0]
    assert np.array_equal(to_bits(values, FP32), values.view(np.uint32))
    assert np.array_equal(from_bits(to_bits(values, FP32), FP32).view(np.uint32), values.view(np.uint32))
    assert np.array_equal(to_bits(values, BF16), values.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.array_equal(from_bits(to_bits(values, BF16), BF16), values.astype(ml_dtypes.bfloat16).astype(np.float32))
    with np.errstate(over="ignore"):
        halves = values.astype(np.float16)
    assert np.array_equal(from_bits(to_bits(values, FP16), FP16), halves.astype(np.float32))
    assert int(to_bits(np.float32(np.nan), BF16)) == 0x7FC0


def test_bad_arguments():
    with pytest.raises(ParameterError, match="FP16 or BF16"):
        fp_mul_exact(0, 0, FP32)
    with pytest.raises(ParameterError, match="outside"):
        fp_mul_exact(0x10000, 0, FP16)
    with pytest.raises(ParameterError, match="outside"):
        fp32_add(-1, 0)
    with pytest.raises(TypeError, match="integer array"):
        fp32_add(1.0, 0)
    with pytest.raises(ParameterError, match="no lanes"):
        fp32_sum_tree(np.zeros((3, 0), dtype=np.uint32))


@pytest.mark.parametrize("fmt,dtype,nan_bits", [(FP16, np.float16, 0x7E00), (BF16, ml_dtypes.bfloat16, 0x7FC0),
                                                (FP32, np.float32, 0x7FC00000)], ids=["fp16", "bf16", "fp32"])
def test_formats_match_numpy(fmt, dtype, nan_bits):
    """The spec's format fields against numpy's / ml_dtypes' own description of the dtype."""
    info = ml_dtypes.finfo(dtype)
    unsigned = np.uint16 if info.bits == 16 else np.uint32
    assert (fmt.width, fmt.fraction_bits) == (info.bits, info.nmant)
    assert (fmt.min_normal_exponent, fmt.max_exponent) == (info.minexp, info.maxexp - 1)
    assert fmt.max_finite() == int(np.array(info.max, dtype).view(unsigned))
    assert fmt.max_finite(negative=True) == int(np.array(-info.max, dtype).view(unsigned))
    assert fmt.infinity() == int(np.array(np.inf, dtype).view(unsigned))
    assert fmt.infinity(negative=True) == int(np.array(-np.inf, dtype).view(unsigned))
    assert fmt.canonical_nan() == nan_bits
    assert int(np.array(1.0, dtype).view(unsigned)) == fmt.bias << fmt.fraction_bits
