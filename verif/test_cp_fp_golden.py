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

``cp_core``'s UPDATE write-back with ``mac="fp16"``
(:func:`trainforge.golden.caterpillar.core_fp16.updated_weight`, ``round16(W - P * 2**-shift)``) and its new
steps (FP32 -> FP16 rounding, FP16 -> FP32 widening, scaling by ``2**-shift``) are checked the same way, on
10**6 random operands and the corners (oracle: ``fp_oracle.oracle_update_weight``, ``oracle_narrow``).

``cp_pe`` with the interleaved accumulator (``partial_sums`` 2, 4, 8): whole dot products through the golden
PE against numpy float32 in the stated order (product ``j`` into partial ``j mod P``, then the pairwise sum of
the partials), and the check shown to fail when the golden PE adds in turn. The same for the interleaved
reduction (``reduction_partials`` 2, 4, 8): whole bus reductions (a handoff, then ``red_add`` in consecutive
cycles) on random and corner values.
"""
import numpy as np
import pytest

import trainforge.golden.fp as fp_golden
from fp_oracle import (describe, flush, mismatches, mismatches16, oracle_add, oracle_mul, oracle_narrow,
                       oracle_scale_down, oracle_update_weight)
from test_fp_golden import N, random_normals, random_pairs
from trainforge.golden.caterpillar.core_fp16 import updated_weight
from trainforge.golden.caterpillar.pe import cp_pe, fp16_multiply_accumulate
from trainforge.spec.caterpillar import PE_MAC_LATENCY, MacOp, pe_accumulate_latency, pe_reduction_latency
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


# ---- cp_core's FP16 write-back: FP32 -> FP16 rounding, the scaling by 2**-shift, the whole UPDATE rule ----

# FP32 values to narrow: zeros, FP32 subnormals (flushed), FP16's smallest normal and the values around it
# (2**-14 - 2**-25 rounds to 2**-14 in IEEE float16 but is below it in 11 bits: flushed), FP16 subnormal values
# (flushed), the largest FP16, 65520 (the tie above it: overflow), infinities, NaNs, exact ties both ways.
NARROW_CORNERS = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x38800000, 0xB8800000, 0x387FF000,
                  0x387FE000, 0x387FFFFF, 0x38000000, 0x33800000, 0x477FE000, 0x477FEFFF, 0x477FF000,
                  0xC77FF000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001,
                  0x3F801000, 0x3F803000, 0x3F801001, 0x3F802FFF, 0x3F800FFF, 0x3F7FF000, 0x3FFFF000,
                  0x3F800000, 0x12345678]
SHIFT_CORNERS = [0, 1, 10, 13, 24, 31]


def random_fp32_for_narrowing(rng, n):
    """Random bits (a third), normals within FP16's range and a few binades around it (a third), and values
    whose 13 dropped fraction bits sit at or next to the tie (a third)."""
    third = n // 3
    bits = rng.integers(0, 1 << 32, third, dtype=np.int64)
    near = random_normals(rng, third, FP32, FP32.bias - 16 - 3, FP32.bias + 15 + 2)
    ties = random_normals(rng, n - 2 * third, FP32, FP32.bias - 16, FP32.bias + 16)
    low = rng.choice(np.array([0x1000, 0x0FFF, 0x1001, 0x0000, 0x1FFF, 0x0001]), ties.size)
    ties = (ties & ~np.int64(0x1FFF)) | low
    return np.concatenate([bits, near, ties]).astype(np.uint32)


def test_narrow_to_fp16(seed):
    """``fp32_to_fp16`` on 10**6 random FP32 values and on the corners, against numpy's float16 rounding."""
    rng = np.random.default_rng(seed)
    values = np.concatenate([random_fp32_for_narrowing(rng, N), np.array(NARROW_CORNERS, dtype=np.uint32)])
    got = fp_golden.fp32_to_fp16(values)
    expected = oracle_narrow(values.view(np.float32))
    bad = mismatches16(got, expected)
    assert not bad.size, [f"{int(values[i]):#010x}: golden {int(got[i]):#06x}, numpy "
                          f"{int(expected.view(np.uint16)[i]):#06x}" for i in bad[:5]]


def test_narrow_by_hand():
    """Hand-worked FP32 -> FP16 roundings."""
    cases = [(0x3F800000, 0x3C00),  # 1
             (0x3F801000, 0x3C00),  # 1 + 2**-11: a tie, 1 is even -> 1
             (0x3F803000, 0x3C02),  # 1 + 3 * 2**-11: a tie, 1 + 2**-10 is odd -> up
             (0x3F801001, 0x3C01),  # just above the tie -> up
             (0x477FE000, 0x7BFF),  # 65504, the largest FP16
             (0x477FF000, 0x7C00),  # 65520: the tie above 65504 rounds to 2**16: overflow -> Inf
             (0x38800000, 0x0400),  # 2**-14, the smallest normal
             (0x387FE000, 0x0000),  # 2**-14 - 2**-25: 11 bits hold it exactly, below 2**-14 -> flushed
             #                        (IEEE float16 rounds it to the subnormal grid: a tie, up to 2**-14)
             (0x387FF000, 0x0400),  # 2**-14 - 2**-26: a tie, 1.1111111111 is odd -> up to 2**-14, normal
             (0xB3800000, 0x8000),  # -2**-24 (an FP16 subnormal) -> -0
             (0x7FC00000, 0x7E00), (0xFF800000, 0xFC00), (0x80000000, 0x8000)]
    for value, expected in cases:
        assert hex(int(fp_golden.fp32_to_fp16(value))) == hex(expected), hex(value)


def test_widen_and_scale_down():
    """``fp16_to_fp32`` on every FP16 pattern and ``fp32_scale_down`` on 10**6 random values and shifts,
    against numpy (float16 -> float32 conversion; float64 scaling), flushed as the datapath does."""
    every = np.arange(1 << 16, dtype=np.uint32)
    got = fp_golden.fp16_to_fp32(every)
    expected = flush(flush(every.astype(np.uint16).view(np.float16)).astype(np.float32))
    assert not mismatches(got, expected).size
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.integers(0, 1 << 32, N, dtype=np.int64).astype(np.uint32),
                             np.array(ACCUMULATOR_CORNERS, dtype=np.uint32)])
    shifts = rng.integers(0, 32, values.size)
    got = fp_golden.fp32_scale_down(values, shifts)
    bad = mismatches(got, oracle_scale_down(values, shifts))
    assert not bad.size, [hex(int(values[i])) for i in bad[:5]]


def random_update_triples(seed):
    """N (W, P, shift): FP16 weights (random bits, normals); P random bits (a third), wide normals (a third),
    or ``2**shift`` times a value a few FP16 ulps from W (a third: cancellation, FP16 ties)."""
    rng = np.random.default_rng(seed)
    third = N // 3
    weight = np.concatenate([rng.integers(0, 1 << 16, third, dtype=np.int64),
                             random_normals(rng, N - third, FP16, 1, FP16.exponent_max_field - 1)])
    shift = rng.integers(0, 32, N)
    near_weight = (fp_golden.fp16_to_fp32(weight[2 * third:] & 0xFFFF).astype(np.int64)
                   + rng.integers(-(1 << 15), 1 << 15, N - 2 * third))
    exponent = np.clip(((near_weight >> 23) & 0xFF) + shift[2 * third:], 1, 254)
    near = (near_weight & ~np.int64(0x7F800000)) | (exponent << 23)
    product = np.concatenate([rng.integers(0, 1 << 32, third, dtype=np.int64),
                              random_normals(rng, third, FP32, 1, FP32.exponent_max_field - 1),
                              near])
    order = rng.permutation(N)
    return ((weight & 0xFFFF)[order].astype(np.uint16), (product & 0xFFFFFFFF)[order].astype(np.uint32),
            shift[order])


def test_update_weight_random(seed):
    """The UPDATE write-back rule ``round16(W - P * 2**-shift)`` on 10**6 random triples against numpy."""
    weight, product, shift = random_update_triples(seed)
    got = updated_weight_each(weight, product, shift)
    expected = oracle_update_weight(weight, product, shift)
    bad = mismatches16(got, expected)
    assert not bad.size, [f"W {int(weight[i]):#06x} P {int(product[i]):#010x} shift {int(shift[i])}: golden "
                          f"{int(got[i]):#06x}, numpy {int(expected.view(np.uint16)[i]):#06x}" for i in bad[:5]]


def test_update_weight_corners():
    """Every corner weight with every corner sum and shift (21 x 23 x 6 triples)."""
    weight, product, shift = (np.array(values).ravel() for values in np.meshgrid(
        OPERAND_CORNERS, ACCUMULATOR_CORNERS, SHIFT_CORNERS, indexing="ij"))
    got = updated_weight_each(weight.astype(np.uint16), product.astype(np.uint32), shift)
    expected = oracle_update_weight(weight.astype(np.uint16), product.astype(np.uint32), shift)
    bad = mismatches16(got, expected)
    assert not bad.size, [(hex(int(weight[i])), hex(int(product[i])), int(shift[i])) for i in bad[:5]]


def test_update_weight_by_hand():
    """Hand-worked write-backs."""
    cases = [  # (W, P, shift, W')
        (0x4400, 0x41000000, 2, 0x4000),   # 4 - 8 / 4 = 2
        (0x3C01, 0xBA000000, 0, 0x3C02),   # (1 + 2**-10) + 2**-11: an FP16 tie, odd -> up to 1 + 2**-9
        (0x3C00, 0xBA000000, 0, 0x3C00),   # 1 + 2**-11: an FP16 tie, even -> 1
        (0x3C00, 0x3F800000, 0, 0x0000),   # 1 - 1 = +0
        (0x0400, 0x3F800000, 31, 0x0400),  # 2**-14 - 2**-31: FP32 keeps it, FP16 rounds back to 2**-14
        (0x3C00, 0x00800000, 1, 0x3C00),   # P * 2**-1 below FP32's normals: flushed, W unchanged
        (0x7BFF, 0xC7800000, 0, 0x7C00),   # 65504 + 65536: overflow -> Inf
        (0x3C00, 0x7F800000, 5, 0xFC00),   # 1 - Inf = -Inf
        (0x7C00, 0x7F800000, 0, 0x7E00),   # Inf - Inf = NaN
    ]
    for weight, product, shift, expected in cases:
        got = updated_weight_each(np.array([weight], np.uint16), np.array([product], np.uint32), np.array([shift]))
        assert hex(int(got[0])) == hex(expected), (hex(weight), hex(product), shift)


def updated_weight_each(weight, product, shift):
    """:func:`~trainforge.golden.caterpillar.core_fp16.updated_weight` with a shift per element."""
    return updated_weight(weight, product, shift)


# ---- cp_reciprocal on the FPU (mac="fp16"): the Goldschmidt recipe on FP16 registers ----

def oracle_reciprocal(values, table_bits, iterations):
    """numpy's recipe (vectorised; the same as the cp_reciprocal table's per-value reference): ``|D| = m 2**e``
    (``frexp``), ``d = float16(m)``, ``x0 = float16(1 / midpoint)``, MACs ``float16(float32(a) float32(b) + 0)``,
    factors ``float16(2 - float32(Q))``, result ``N 2**-e`` with D's sign, flushed below 2**-126 (float32 view)."""
    d_value = np.asarray(values, np.uint32).view(np.float32)
    with np.errstate(all="ignore"):  # NaN operands raise numpy's "invalid" when cast
        magnitude = np.abs(d_value.astype(np.float64))
        mantissa, exponent = np.frexp(np.where(np.isfinite(magnitude) & (magnitude > 0), magnitude, 1.0))
        index = ((2 * mantissa - 1) * (1 << table_bits)).astype(np.int64)
        midpoint = 0.5 + (index + 0.5) / (1 << (table_bits + 1))
        d, n = mantissa.astype(np.float16), (1.0 / midpoint).astype(np.float16)

        def mac(a, b):
            return (a.astype(np.float32) * b.astype(np.float32) + np.float32(0)).astype(np.float16)

        q = mac(d, n)
        for iteration in range(iterations):
            factor = (np.float32(2) - q.astype(np.float32)).astype(np.float16)
            n = mac(n, factor)
            if iteration < iterations - 1:
                q = mac(q, factor)
        result = n.astype(np.float64) * np.power(2.0, -exponent.astype(np.float64))
        result = np.where(result < 2.0 ** -126, 0.0, result)
        result = np.where(magnitude < 2.0 ** -126, np.inf, result)
        result = np.where(np.isinf(magnitude), 0.0, result)
        result = np.copysign(result, d_value).astype(np.float32)
    return np.where(np.isnan(d_value), np.float32(np.nan), result)


def random_fp32_values(seed, count=N):
    """Random FP32 bit patterns (a tenth: every special) and normals of every exponent."""
    rng = np.random.default_rng(seed)
    tenth = count // 10
    return np.concatenate([rng.integers(0, 1 << 32, tenth, dtype=np.int64),
                           random_normals(rng, count - tenth, FP32, 1, FP32.exponent_max_field - 1)]).astype(np.uint32)


@pytest.mark.parametrize("table_bits, iterations", [
    (3, 2),                                                           # the defaults
    pytest.param(5, 1, marks=pytest.mark.regress), pytest.param(1, 3, marks=pytest.mark.regress)])
def test_reciprocal_fp16_against_numpy(seed, table_bits, iterations):
    """``reciprocal_unit_fp16`` on 10**6 random FP32 values and the corners, at three table/iteration settings
    (the two off the defaults in make regress)."""
    from trainforge.golden.caterpillar.goldschmidt import reciprocal_unit_fp16
    corners = np.array([0, 0x80000000, 1, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 0x00800000,
                        0x7F7FFFFF, 0x7F000000, 0x7E800000, 0x3FFFFFFF, 0x3FFFF000], dtype=np.uint32)
    values = np.concatenate([random_fp32_values(seed), corners])
    got = reciprocal_unit_fp16(values, table_bits=table_bits, iterations=iterations).astype(np.uint32)
    bad = mismatches(got, oracle_reciprocal(values, table_bits, iterations))
    assert not bad.size, [hex(int(values[i])) for i in bad[:5]]


def test_reciprocal_fp16_accuracy(seed):
    """At the defaults (table_bits 3, iterations 2) every normal result is within 2**-9 of ``1 / D`` (the FP16
    registers: 11 significand bits; measured maximum printed in hw/caterpillar/README.md)."""
    from trainforge.golden.caterpillar.goldschmidt import reciprocal_unit_fp16
    rng = np.random.default_rng(seed)
    values = random_normals(rng, 100_000, FP32, 2, 250).astype(np.uint32)
    got = reciprocal_unit_fp16(values).astype(np.uint32).view(np.float32).astype(np.float64)
    exact = 1.0 / values.view(np.float32).astype(np.float64)
    assert np.max(np.abs(got / exact - 1)) < 2.0 ** -9


# ---- cp_pe with the interleaved accumulator (partial_sums 2, 4, 8): the order of a whole sum ----

def interleaved_sums(products, partials):
    """numpy float32: products ``[:, j]`` added in turn to partial ``j mod partials`` (``+0`` first), then the
    pairwise sum of the partials ``(q0 + q1) + (q2 + q3) ...``; every add flushed (``oracle_add``)."""
    values = [np.zeros(products.shape[0], np.float32) for _ in range(partials)]
    for j in range(products.shape[1]):
        values[j % partials] = oracle_add(values[j % partials].view(np.uint32), products[:, j].view(np.uint32))
    while len(values) > 1:
        values = [oracle_add(values[k].view(np.uint32), values[k + 1].view(np.uint32))
                  for k in range(0, len(values), 2)]
    return values[0].view(np.uint32)


def pe_dot_products(seed, partials, sums=12, length=96):
    """``sums`` back-to-back dot products of ``length`` FP16 pairs on the row and column buses (``ROW_COL``,
    the first with ``mac_clear``, the last with ``handoff``) through the golden ``cp_pe``; returns the products
    (oracle) and the ``red`` value after each handoff's landing cycle."""
    rng = np.random.default_rng(seed)
    # Normals of exponent fields 5..25 (2**-10 .. 2**10): products over 40 binades, so the sums round often.
    a = ((rng.integers(0, 2, (sums, length)) << 15) | (rng.integers(5, 26, (sums, length)) << 10)
         | rng.integers(0, 1 << 10, (sums, length)))
    b = ((rng.integers(0, 2, (sums, length)) << 15) | (rng.integers(5, 26, (sums, length)) << 10)
         | rng.integers(0, 1 << 10, (sums, length)))
    latency = pe_accumulate_latency(partials)
    rows = sums * length
    cycles = rows + PE_MAC_LATENCY + latency + 1
    mac_op = np.zeros(cycles, np.int64)
    mac_op[:rows] = MacOp.ROW_COL
    clear = np.zeros(cycles, bool)
    clear[:rows:length] = True
    handoff = np.zeros(cycles, bool)
    handoff[length - 1:rows:length] = True
    row_bus = np.zeros(cycles, np.int64)
    col_bus = np.zeros(cycles, np.int64)
    row_bus[:rows], col_bus[:rows] = a.ravel(), b.ravel()
    zeros = np.zeros(cycles, np.int64)
    _, red, _ = cp_pe([0], zeros, mac_op, clear, handoff, zeros.astype(bool), row_bus, col_bus, zeros,
                      mac="fp16", partial_sums=partials)
    landings = np.arange(length - 1, rows, length) + PE_MAC_LATENCY + latency
    products = oracle_mul(a.astype(np.uint16), b.astype(np.uint16), FP16)
    return products, red[landings].astype(np.uint32)


@pytest.mark.parametrize("partials", [2, 4, 8])
def test_interleaved_pe_sums_against_numpy(seed, partials):
    """Whole sums of the golden PE with ``partial_sums`` partials equal numpy float32 in the stated order."""
    products, got = pe_dot_products(seed, partials)
    expected = interleaved_sums(products, partials)
    wrong = mismatches(got, expected)
    assert wrong.size == 0, f"partials {partials}: sum {wrong[0]} got {hex(got[wrong[0]])}, " \
                            f"expected {hex(expected[wrong[0]])}"


def test_sequential_order_is_caught(monkeypatch, seed):
    """The check tells the orders apart: the golden PE adding each sum's products in turn (one partial, at the
    4-partial latency) fails it on most sums."""
    import trainforge.golden.caterpillar.pe as golden_pe
    interleaved = golden_pe.fp32_accumulate
    monkeypatch.setattr(golden_pe, "fp32_accumulate", lambda rows, clear, partials, read=None:
                        interleaved(rows, clear, 1, read))
    products, got = pe_dot_products(seed, 4)
    assert mismatches(got, interleaved_sums(products, 4)).size > 6


# ---- cp_pe with the interleaved reduction (reduction_partials 2, 4, 8): the order of a whole reduction ----

def pe_reductions(seed, partials, reductions=40, terms=16, corner_fraction=0.03):
    """``reductions`` back-to-back bus reductions of ``terms`` FP32 values through the golden ``cp_pe``
    (one-cycle accumulate stage): a MAC ``a * b`` with ``mac_clear`` and ``handoff`` gives ``v0`` (it lands 2
    cycles after its operand stage), then ``red_add`` of ``v1 .. v(terms-1)`` in the next cycles, and the next
    reduction's handoff lands in the cycle after the last ``red_add`` (the bus kept busy every cycle). Returns
    the values (oracle) and ``red`` after the cycle where each reduction's last result lands."""
    rng = np.random.default_rng(seed)
    a = random_normals(rng, reductions, FP16, 5, 25).astype(np.int64)
    b = random_normals(rng, reductions, FP16, 5, 25).astype(np.int64)
    # red_in: FP32 normals over 40 binades around the products, a fraction of them corners (zeros, subnormals,
    # values that cancel or tie, the largest finite values, infinities, NaNs); as many operands corners too.
    red_in = random_normals(rng, reductions * (terms - 1), FP32, 107, 147).astype(np.int64)
    corners = rng.random(red_in.size) < corner_fraction
    red_in[corners] = rng.choice(ACCUMULATOR_CORNERS, int(corners.sum()))
    for operand in (a, b):
        corners = rng.random(operand.size) < corner_fraction
        operand[corners] = rng.choice(OPERAND_CORNERS, int(corners.sum()))
    red_in = red_in.reshape(reductions, terms - 1)
    latency = pe_reduction_latency(partials)
    cycles = PE_MAC_LATENCY + reductions * terms + latency + 1
    mac_op = np.zeros(cycles, np.int64)
    clear = np.zeros(cycles, bool)
    handoff = np.zeros(cycles, bool)
    red_add = np.zeros(cycles, bool)
    row_bus = np.zeros(cycles, np.int64)
    col_bus = np.zeros(cycles, np.int64)
    bus_in = np.zeros(cycles, np.int64)
    reads = []
    for k in range(reductions):
        landing = PE_MAC_LATENCY + k * terms  # the handoff's landing cycle
        operand = landing - PE_MAC_LATENCY
        mac_op[operand], clear[operand], handoff[operand] = MacOp.ROW_COL, True, True
        row_bus[operand], col_bus[operand] = a[k], b[k]
        red_add[landing + 1:landing + terms] = True
        bus_in[landing + 1:landing + terms] = red_in[k]
        reads.append(landing + terms - 1 + latency)
    handoffs = PE_MAC_LATENCY + np.arange(reductions) * terms
    assert not set(reads) & set(handoffs.tolist()), "a handoff lands where a sum is read"
    zeros = np.zeros(cycles, np.int64)
    _, red, _ = cp_pe([0], zeros, mac_op, clear, handoff, red_add, row_bus, col_bus, bus_in,
                      mac="fp16", reduction_partials=partials)
    products = oracle_mul(a.astype(np.uint16), b.astype(np.uint16), FP16).view(np.uint32)
    values = np.concatenate([products[:, None], red_in.astype(np.uint32)], axis=1).view(np.float32)
    return values, red[reads].astype(np.uint32)


@pytest.mark.parametrize("partials", [2, 4, 8])
def test_interleaved_pe_reductions_against_numpy(seed, partials):
    """Whole reductions of the golden PE with ``reduction_partials`` partials equal numpy float32 in the stated
    order: ``v0`` (the handoff), ``v1``, ... into partial ``j mod P`` from ``+0``, then the pairwise sum."""
    values, got = pe_reductions(seed, partials)
    expected = interleaved_sums(values, partials).view(np.float32)  # float32: a NaN is any NaN
    wrong = mismatches(got, expected)
    assert wrong.size == 0, f"partials {partials}: reduction {wrong[0]} got {hex(got[wrong[0]])}, " \
                            f"expected {hex(expected[wrong[0]])}"


def test_interleaved_pe_reductions_on_corners(seed):
    """The same with half of the operands and ``red_in`` values corners: overflow of the largest finite values,
    signed zeros, infinities of both signs (NaN), NaNs, flushed subnormals, ties with ``2**24``. 400 reductions
    of 4 terms (``n_r`` 4), so that about half of them stay finite (seed 3: 215 finite, 132 NaN, 52 Inf); the
    golden reducing in turn fails it (16 of the 400 at seed 3)."""
    values, got = pe_reductions(seed, 4, reductions=400, terms=4, corner_fraction=0.5)
    expected = interleaved_sums(values, 4).view(np.float32)
    wrong = mismatches(got, expected)
    assert wrong.size == 0, f"reduction {wrong[0]} got {hex(got[wrong[0]])}, expected {hex(expected[wrong[0]])}"


def test_sequential_reduction_is_caught(monkeypatch, seed):
    """The check tells the orders apart: the golden PE reducing in turn (one partial, at the 4-partial latency)
    fails it on many reductions (12 to 25 of the 40 over 40 seeds)."""
    import trainforge.golden.caterpillar.pe as golden_pe
    interleaved = golden_pe.fp32_accumulate
    monkeypatch.setattr(golden_pe, "fp32_accumulate", lambda rows, clear, partials, read=None:
                        interleaved(rows, clear, 1, read))
    values, got = pe_reductions(seed, 4)
    assert mismatches(got, interleaved_sums(values, 4).view(np.float32)).size > 6


def _diagonal_reductions(params, steps, overlap, blocks, gap=None, seed=0):
    """The diagonal PE of a ``cp_core`` bus reduction, run on the golden ``cp_pe`` cycle model along the core's
    schedule: block ``b``'s handoff lands every ``steps + gap`` cycles (``gap``: the core's
    :func:`~trainforge.spec.caterpillar.gemv_block_gap` unless given), its ``R`` bus words follow as ``red_add``
    rows, and the output copies ``red`` ``R + Lr + 1`` cycles after the handoff. Returns the copied words and the
    expected sums (numpy float32 in the interleaved order, ``oracle_add``), FP32 bits."""
    from trainforge.spec.caterpillar import core_reduction_latency, gemv_block_gap, reduction_cycles
    rng = np.random.default_rng(seed)
    reductions, latency = reduction_cycles(params["n_r"], "bus"), core_reduction_latency(params)
    period = steps + (gemv_block_gap(steps, overlap, params) if gap is None else gap)
    landings = [8 + block * period for block in range(blocks)]
    cycles = landings[-1] + reductions + latency + 4
    mac_op, clear, handoff = np.zeros(cycles, np.int64), np.zeros(cycles, bool), np.zeros(cycles, bool)
    row_bus, col_bus = np.zeros(cycles, np.int64), np.zeros(cycles, np.int64)
    red_add, red_in = np.zeros(cycles, bool), np.zeros(cycles, np.int64)
    expected = []
    for landing in landings:
        issue = landing - PE_MAC_LATENCY  # the operand stage of the handoff's MAC (one-cycle accumulate stage)
        a, b = (int(value) for value in random_normals(rng, 2, FP16, 11, 19))
        mac_op[issue], clear[issue], handoff[issue], row_bus[issue], col_bus[issue] = MacOp.ROW_COL, 1, 1, a, b
        words = [int(value) for value in random_normals(rng, reductions, FP32, 107, 147)]
        red_add[landing + 1:landing + 1 + reductions] = True
        red_in[landing + 1:landing + 1 + reductions] = words
        terms = [oracle_mul(np.array([a], np.uint16), np.array([b], np.uint16), FP16).view(np.uint32)]
        terms += [np.array([word], np.uint32) for word in words]
        partials = [np.zeros(1, np.uint32)] * params["reduction_partials"]
        for index, term in enumerate(terms):
            partials[index % len(partials)] = oracle_add(partials[index % len(partials)], term).view(np.uint32)
        while len(partials) > 1:
            partials = [oracle_add(partials[k], partials[k + 1]).view(np.uint32) for k in range(0, len(partials), 2)]
        expected.append(int(partials[0][0]))
    _, red, _ = cp_pe(np.zeros(4, np.int64), np.zeros(cycles, np.int64), mac_op, clear, handoff, red_add, row_bus,
                      col_bus, red_in, mac="fp16", reduction_partials=params["reduction_partials"])
    copied = [int(red[landing + reductions + latency]) & 0xFFFFFFFF for landing in landings]
    return copied, expected


@pytest.mark.parametrize("n_r", [pytest.param(2, marks=pytest.mark.regress), pytest.param(3, marks=pytest.mark.regress),
                                 4])   # 2 and 3 (5 s) in make regress, to keep make test under 5 minutes
def test_core_schedule_keeps_handoffs_off_the_reduction_landing(n_r):
    """``cp_core`` with the interleaved bus reduction (R 4): along the core's GEMV schedule (every block length
    1 .. 24, with and without overlap), the golden PE model's ``red``, copied ``R + Lr + 1`` cycles after each
    handoff, is each block's sum. Without the gap's lengthening (:func:`gemv_landing_collisions`) a later handoff
    lands in the cycle a sum is written and wins: the same check fails for the periods that divide ``R + Lr``."""
    from trainforge.spec.caterpillar import CORE_PARAMS, reduction_cycles
    params = CORE_PARAMS.resolve(n_r=n_r, mac="fp16", reduction_partials=4)
    drain = reduction_cycles(n_r, "bus") + 1
    lost = []
    for steps in range(1, 25):
        for overlap in (False, True):
            copied, expected = _diagonal_reductions(params, steps, overlap, 24, seed=steps)
            assert copied == expected, (steps, overlap)
            unlengthened = max(0, drain - steps) if overlap else drain
            copied, expected = _diagonal_reductions(params, steps, overlap, 24, gap=unlengthened, seed=steps)
            if copied != expected:
                lost.append(steps + unlengthened)
    span = drain - 1 + pe_reduction_latency(4)
    assert lost and all(span % period == 0 for period in lost)
