"""numpy's IEEE arithmetic as the oracle of the FP golden models, with the datapaths' flush-to-zero policy.

numpy computes the IEEE result (float16/float32, ml_dtypes bfloat16; round to
nearest even, with subnormals); :func:`flush` applies the datapath's policy
on the oracle's inputs and outputs, written here independently of the golden
models. NaN results compare as "is NaN" on the oracle side; the golden models
must give the canonical quiet NaN (:data:`QUIET_NAN32`, a constant of IEEE
binary32 written here). Used by ``test_fp_golden.py``, ``test_cp_fp_golden.py``
and the ``cp_pe`` scenario table.
"""
import ml_dtypes
import numpy as np

from trainforge.spec.fp import FP16

__all__ = ["QUIET_NAN32", "QUIET_NAN16", "MIN_NORMAL", "flush", "oracle_add", "oracle_mul", "oracle_narrow",
           "oracle_scale_down", "oracle_update_weight", "mismatches", "mismatches16", "describe"]

#: IEEE binary32 canonical quiet NaN.
QUIET_NAN32 = 0x7FC00000
#: IEEE binary16 canonical quiet NaN.
QUIET_NAN16 = 0x7E00
MIN_NORMAL = {np.dtype(np.float16): np.float16(2.0 ** -14), np.dtype(np.float32): np.float32(2.0 ** -126),
              np.dtype(ml_dtypes.bfloat16): ml_dtypes.bfloat16(2.0 ** -126)}


def flush(values):
    """Subnormals -> zero of the same sign (values of one numpy float dtype)."""
    values = np.asarray(values)
    with np.errstate(invalid="ignore"):
        tiny = np.abs(values) < MIN_NORMAL[values.dtype]
    return np.where(tiny, np.copysign(np.zeros_like(values), values), values).astype(values.dtype)


def oracle_add(a_bits, b_bits):
    a = flush(np.asarray(a_bits, np.uint32).view(np.float32))
    b = flush(np.asarray(b_bits, np.uint32).view(np.float32))
    with np.errstate(all="ignore"):
        return flush(a + b)


def oracle_mul(a_bits, b_bits, fmt):
    dtype = np.float16 if fmt is FP16 else ml_dtypes.bfloat16
    a = flush(np.asarray(a_bits, np.uint16).view(dtype)).astype(np.float32)
    b = flush(np.asarray(b_bits, np.uint16).view(dtype)).astype(np.float32)
    with np.errstate(all="ignore"):
        return flush(a * b)


def oracle_narrow(values32):
    """float32 values (flushed on input) rounded to float16 by numpy, nearest even, then flushed on output.

    The policy flushes a result whose exponent *after rounding* (with an unbounded exponent range) is below
    FP16's smallest normal. numpy rounds a value below ``2**-14`` to a float16 subnormal instead (fewer bits,
    so it may round up to ``2**-14``); the oracle therefore rounds such a value scaled by ``2**24`` (an exact
    scaling, into float16's normal range) and scales back in float64, then flushes.
    """
    with np.errstate(all="ignore"):
        values = flush(np.asarray(values32, dtype=np.float32)).astype(np.float64)
        small = np.abs(values) < 2.0 ** -14
        scaled = (values * 2.0 ** 24).astype(np.float16).astype(np.float64) * 2.0 ** -24
        rounded = np.where(small, scaled, values.astype(np.float16).astype(np.float64))
        tiny = np.abs(rounded) < 2.0 ** -14
    return np.where(tiny, np.copysign(0.0, values), rounded).astype(np.float16)


def oracle_scale_down(bits32, shift):
    """FP32 values (flushed on input) times ``2**-shift`` in float64 (exact), flushed below FP32's normals."""
    with np.errstate(invalid="ignore"):
        values = flush(np.asarray(bits32, np.uint32).view(np.float32)).astype(np.float64)
        scaled = values * np.power(2.0, -np.asarray(shift, dtype=np.float64))
        tiny = np.abs(scaled) < 2.0 ** -126
    return np.where(tiny, np.copysign(0.0, scaled), scaled).astype(np.float32)


def oracle_update_weight(weight_bits16, product_bits32, shift):
    """numpy's ``fp16(W - P * 2**-shift)``: the FP16 weight widened to float32, the scaled sum subtracted in
    float32 (one rounding), the difference rounded to float16 (:func:`oracle_narrow`), flushed throughout."""
    weight = flush(np.asarray(weight_bits16, np.uint16).view(np.float16)).astype(np.float32)
    scaled = oracle_scale_down(product_bits32, shift)
    with np.errstate(all="ignore"):
        difference = flush((weight - scaled).astype(np.float32))
    return oracle_narrow(difference)


def mismatches16(got_bits, expected):
    """Indices where FP16 golden bits differ from the oracle's float16 results (NaN: the canonical 0x7E00)."""
    got_bits = np.asarray(got_bits)
    assert got_bits.dtype == np.uint16
    nan = np.isnan(expected)
    bad = np.where(nan, got_bits != QUIET_NAN16, got_bits != expected.view(np.uint16))
    return np.flatnonzero(bad)


def mismatches(got_bits, expected):
    """Indices where the golden bits differ from the oracle's float32 results."""
    got_bits = np.asarray(got_bits)
    assert got_bits.dtype == np.uint32
    nan = np.isnan(expected)
    bad = np.where(nan, got_bits != QUIET_NAN32, got_bits != expected.view(np.uint32))
    return np.flatnonzero(bad)


def describe(index, a_bits, b_bits, got, expected):
    return [f"{int(a_bits[i]):#x} {int(b_bits[i]):#x}: golden {int(got[i]):#010x}, "
            f"numpy {int(expected.view(np.uint32)[i]):#010x}" for i in index[:5]]
