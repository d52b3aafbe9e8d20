"""The ``cp_pe`` FPU (``mac="fp16"``) golden arithmetic against numpy's IEEE float16/float32 arithmetic.

The MAC step of the golden model, ``acc + a * b`` (FP16 operands, FP32
accumulator, :func:`trainforge.golden.caterpillar.pe.fp16_multiply_accumulate`),
is checked on 10**6 random triples and on every combination of the corner
values below; the oracle is numpy (``verif/fp_oracle.py``): the FP16 operands
widened to float32 and multiplied (exact: 11 x 11 significand bits fit
float32's 24), then one float32 addition, with the flush-to-zero policy applied
by the oracle itself. The whole PE (``cp_pe`` with its pipeline) is checked
against an independent cycle model by the scenario table
(``verif/scenarios/cp_pe.py``).
"""
import numpy as np

import trainforge.golden.fp as fp_golden
from fp_oracle import describe, mismatches, oracle_add, oracle_mul
from test_fp_golden import N, random_normals, random_pairs
from trainforge.golden.caterpillar.pe import fp16_multiply_accumulate
from trainforge.spec.fp import FP16, FP32

# FP16 operand corners: signed zeros, subnormals (flushed), the smallest and largest normals, one and
# near-one significands, infinities, quiet and signalling NaNs.
OPERAND_CORNERS = [0x0000, 0x8000, 0x0001, 0x83FF, 0x0200, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0x3BFF,
                   0x3FFF, 0x3555, 0x7BFF, 0xFBFF, 0x4000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01]

# FP32 accumulator corners: signed zeros, subnormals (flushed), the smallest normal, values that cancel
# or tie with the products of the corners above, the largest finite values, infinities, NaNs.
ACCUMULATOR_CORNERS = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800000,
                       0x3F800000, 0xBF800000, 0x33800000, 0xB3800000, 0x4B800000, 0xCB800000,
                       0x7F7FFFFF, 0xFF7FFFFF, 0x4F7FC004, 0xCF7FC004, 0x31800000, 0xB1800000,
                       0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001]


def oracle_mac(acc_bits, a_bits, b_bits):
    """numpy: the exact float32 product, then one float32 addition (flushed as the datapath does)."""
    product = oracle_mul(a_bits, b_bits, FP16)
    return oracle_add(acc_bits, product.view(np.uint32))


def accumulators_near(rng, a_bits, b_bits):
    """FP32 accumulators a few binades from each product, of random sign: cancellation, ties, carries."""
    product = oracle_mul(a_bits, b_bits, FP16).view(np.uint32).astype(np.int64)
    exponent = (product >> FP32.fraction_bits) & FP32.exponent_max_field
    exponent = np.clip(exponent + rng.integers(-26, 27, exponent.size), 1, FP32.exponent_max_field - 1)
    fraction = np.where(rng.random(exponent.size) < 0.5, product & FP32.fraction_mask,
                        rng.integers(0, 1 << FP32.fraction_bits, exponent.size))
    sign = rng.integers(0, 2, exponent.size)
    return ((sign << 31) | (exponent << FP32.fraction_bits) | fraction).astype(np.uint32)


def random_triples(seed):
    """N (acc, a, b): FP16 pairs of ``random_pairs``; accumulators random bits (a third), zeros and
    wide-spread normals (a third), or near the product (a third)."""
    rng = np.random.default_rng(seed)
    a, b = random_pairs(rng, FP16)
    third = N // 3
    acc = np.concatenate([
        rng.integers(0, 1 << 32, third, dtype=np.int64).astype(np.uint32),
        np.where(rng.random(third) < 0.1, 0,
                 random_normals(rng, third, FP32, 1, FP32.exponent_max_field - 1)).astype(np.uint32),
        accumulators_near(rng, a[2 * third:], b[2 * third:]),
    ])
    order = rng.permutation(N)
    return acc[order], a[order], b[order]


def test_mac_corners():
    """Every corner accumulator with every pair of corner operands (23 x 21 x 21 triples)."""
    acc, a, b = (np.array(values).ravel() for values in np.meshgrid(
        ACCUMULATOR_CORNERS, OPERAND_CORNERS, OPERAND_CORNERS, indexing="ij"))
    got = fp16_multiply_accumulate(acc, a, b)
    expected = oracle_mac(acc, a, b)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


def test_mac_random(seed):
    """10**6 random triples, spread over the three kinds of accumulator."""
    acc, a, b = random_triples(seed)
    assert acc.size == N == 1_000_000
    got = fp16_multiply_accumulate(acc, a, b)
    expected = oracle_mac(acc, a, b)
    bad = mismatches(got, expected)
    assert not bad.size, describe(bad, a, b, got, expected)


def test_mac_by_hand():
    """Hand-worked FP32 results: exact small integers, a tie, one rounding of the fused sum, the specials."""
    cases = [  # (acc, a, b, acc + a * b)
        (0x41400000, 0x4400, 0x4500, 0x42000000),   # 12 + 4 * 5 = 32
        (0x00000000, 0xC600, 0x4200, 0xC1900000),   # 0 + (-6) * 3 = -18
        (0x4B800000, 0x3C00, 0x3C00, 0x4B800000),   # 2**24 + 1: a tie, 2**24 is even -> 2**24
        (0x4B800001, 0x3C00, 0x3C00, 0x4B800002),   # (2**24 + 2) + 1: a tie, odd -> up
        # 1 + (1 + 2**-10)**2 = 2 * (1 + 2**-10 + 2**-21): fraction bits 13 and 2, exact in FP32
        (0x3F800000, 0x3C01, 0x3C01, 0x40002004),
        # 1 + (1 + 2**-10) * 2**-14: 2**-14 is fraction bit 9; the 2**-24 is a tie at the ulp 2**-23, even -> dropped
        (0x3F800000, 0x3C01, 0x0400, 0x3F800200),
        (0x3F800000, 0x0001, 0x7BFF, 0x3F800000),   # subnormal operand flushed: 1 + 0
        (0x7F800000, 0xFC00, 0x3C00, 0x7FC00000),   # Inf + (-Inf) = NaN
        (0x3F800000, 0x7C00, 0x0000, 0x7FC00000),   # Inf * 0 = NaN
        (0x80000000, 0x8000, 0x3C00, 0x80000000),   # -0 + (-0) = -0
        (0x3F800000, 0xBC00, 0x3C00, 0x00000000),   # 1 - 1 = +0
    ]
    for acc, a, b, expected in cases:
        assert hex(int(fp16_multiply_accumulate(acc, a, b))) == hex(expected), (hex(acc), hex(a), hex(b))


def test_truncating_rounding_is_caught(monkeypatch, seed):
    """The oracle is not vacuous: a MAC whose adder truncates instead of rounding fails it."""
    monkeypatch.setattr(fp_golden, "_round_nearest_even", lambda extended: extended >> fp_golden.GRS_BITS)
    acc, a, b = random_triples(seed)
    assert mismatches(fp16_multiply_accumulate(acc, a, b), oracle_mac(acc, a, b)).size > 1000


def test_fp16_accumulation_is_caught(seed):
    """The oracle tells FP32 from FP16 accumulation: rounding each sum to FP16 fails it."""
    acc, a, b = random_triples(seed)
    with np.errstate(over="ignore"):
        acc16 = acc.view(np.float32).astype(np.float16).astype(np.float32).view(np.uint32)
        rounded = fp16_multiply_accumulate(acc16, a, b).view(np.float32).astype(np.float16).astype(np.float32)
    assert mismatches(rounded.view(np.uint32), oracle_mac(acc16, a, b)).size > 100_000
