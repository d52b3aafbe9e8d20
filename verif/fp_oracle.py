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

__all__ = ["QUIET_NAN32", "MIN_NORMAL", "flush", "oracle_add", "oracle_mul", "mismatches", "describe"]

#: IEEE binary32 canonical quiet NaN.
QUIET_NAN32 = 0x7FC00000
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
