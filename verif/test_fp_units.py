"""The FP MAC pieces outside simulation: the accumulate rule's golden model, stage counts, latencies, interface."""
import numpy as np
import pytest
from amaranth import Signal

from trainforge.golden.fp import fp32_accumulate
from trainforge.hw.dense_pe import DensePE
from trainforge.hw.fp.add import add_cuts
from trainforge.hw.fp.multiply import multiply_cuts
from trainforge.hw.mac import MAC_UNITS
from trainforge.spec import dense_pe as dense_spec

from scenarios.fp_mul import QUIET_NAN32, flush32


def test_accumulate_matches_numpy_float32(seed):
    """``fp32_accumulate`` equals a float32 loop, ``(+0 if clear else acc) + row_sum`` with the flush, row by row."""
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(400) * 2.0 ** rng.integers(-30, 30, 400)).astype(np.float32)
    values[5] = np.float32(2.0 ** -130)                     # a subnormal row sum
    values[9] = np.float32("inf")
    values[10] = np.float32("-inf")                         # Inf - Inf in the accumulator, unless cleared
    clear = rng.random(400) < 0.1
    clear[0] = True
    expected, total = [], np.float32(0)
    with np.errstate(all="ignore"):
        for value, cleared in zip(values, clear):
            total = flush32((np.float32(0) if cleared else total) + flush32(value))
            expected.append(QUIET_NAN32 if np.isnan(total) else int(np.float32(total).view(np.uint32)))
    actual = fp32_accumulate(values.view(np.uint32), clear)
    assert actual.dtype == np.uint32 and actual.tolist() == expected


def test_cleared_negative_zero_is_positive_zero():
    assert fp32_accumulate([0x80000000, 0x80000000], [True, False]).tolist() == [0, 0]
    assert fp32_accumulate([0x3F800000], [False], accumulator=0x3F800000).tolist() == [0x40000000]
    # 1.5 then -1.5: exact cancellation gives +0; a clear row of -1.5 restarts from +0.
    assert fp32_accumulate([0x3FC00000, 0xBFC00000, 0xBFC00000], [True, False, True]).tolist() == \
        [0x3FC00000, 0, 0xBFC00000]


def test_latencies_by_hand():
    """Operand register, multiplier, tree, output stage: integer 1+1+1+1; FP 1+2+4*levels+1."""
    assert dense_spec.latency(DensePE.PARAMS.resolve()) == 4
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="fp16")) == 12
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="bf16", lanes=5)) == 16
    assert dense_spec.latency(DensePE.PARAMS.resolve(mac="bf16", lanes=1)) == 8


def test_stage_cuts():
    assert [len(add_cuts(stages)) for stages in range(8)] == list(range(8))
    assert [len(multiply_cuts(stages)) for stages in range(3)] == [0, 1, 2]
    for stages in range(1, 8):
        assert add_cuts(stages)[-1] == 6, "the last stage holds the sum"
    with pytest.raises(ValueError):
        add_cuts(8)
    with pytest.raises(ValueError):
        multiply_cuts(3)


def test_float_accumulate_needs_the_module():
    unit = MAC_UNITS["fp16"](DensePE.PARAMS.resolve(mac="fp16"))
    with pytest.raises(TypeError, match="module"):
        unit.accumulate(Signal(32), Signal(32), Signal())


def test_float_zero_detector_reads_the_exponent():
    unit = MAC_UNITS["bf16"](DensePE.PARAMS.resolve(mac="bf16"))
    operand = Signal(16)
    assert len(unit.is_zero(operand)) == 1
    assert unit.operand_shape.width == 16 and unit.product_shape.width == 32 and unit.result_shape.width == 32
