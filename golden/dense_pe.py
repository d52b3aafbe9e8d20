"""Golden model of :class:`trainforge.hw.dense_pe.DensePE`: vectorised numpy, bit-exact."""
import numpy as np

from ..spec import dense_pe as spec
from ..spec.mac import FLOAT_FORMATS
from .fp import fp32_accumulate, fp32_sum_tree, fp_mul_exact

__all__ = ["wrap", "dense_pe"]


def wrap(values, bits, is_signed):
    """Reduce integers modulo ``2**bits`` and read them as ``bits``-bit two's complement or unsigned.

    Parameters
    ----------
    values : array_like of uint64
        Values already reduced modulo ``2**64``.
    bits : int
        Target width, 1 to 64.
    is_signed : bool
        Interpret the result as two's complement.

    Returns
    -------
    numpy.ndarray of int64 (signed) or uint64 (unsigned)
    """
    values = np.asarray(values, dtype=np.uint64)
    if bits < 64:
        values = values & np.uint64((1 << bits) - 1)
    if not is_signed:
        return values
    if bits == 64:
        return values.view(np.int64)
    sign = np.uint64(1 << (bits - 1))
    return (values ^ sign).astype(np.int64) - np.int64(1 << (bits - 1))


def dense_pe(a, b, clear, read, **params):
    """Results of a dense PE over a stream of rows.

    Integer MAC: all arithmetic is modulo ``2**64`` in ``uint64`` (two's
    complement operands embed exactly), then reduced to ``acc_width`` bits:
    this equals the hardware's wrap-around for every ``acc_width <= 64``.

    FP MACs (``mac="fp16"`` or ``"bf16"``): per row, the exact FP32 product of
    each lane (:func:`~trainforge.golden.fp.fp_mul_exact`), the pairwise adder
    tree over the lanes (:func:`~trainforge.golden.fp.fp32_sum_tree`), then
    the interleaved accumulator (:func:`~trainforge.golden.fp.fp32_accumulate`,
    :data:`~trainforge.spec.mac.PARTIAL_SUMS` ``partial_sums``).

    Parameters
    ----------
    a, b : array_like of int, shape (rows, lanes)
        Operands, already within the operand range (FP: 16-bit bit patterns).
    clear, read : array_like of bool, shape (rows,)
        Row flags, as in :class:`~trainforge.hw.dense_pe.DensePE`.
    **params :
        The block's parameters (:data:`trainforge.spec.dense_pe.PARAMS`);
        those not given take the schema's defaults, and others are ignored.
        ``acc_width`` and ``signed`` shape the result.

    Returns
    -------
    numpy.ndarray
        One accumulated value per ``read`` row, in row order (FP: uint32 FP32 bit patterns).
    """
    # Callers that wrap the dense PE (the TensorDash MACs) pass their whole parameter dict.
    params = spec.PARAMS.resolve(**{name: value for name, value in params.items() if name in spec.PARAMS.names})
    if params["mac"] in FLOAT_FORMATS:
        return _dense_pe_float(a, b, clear, read, FLOAT_FORMATS[params["mac"]], params["partial_sums"])
    a = np.asarray(a, dtype=np.int64).astype(np.uint64)
    b = np.asarray(b, dtype=np.int64).astype(np.uint64)
    clear = np.asarray(clear, dtype=bool)
    read = np.asarray(read, dtype=bool)
    row_sums = (a * b).sum(axis=1, dtype=np.uint64)
    running = np.cumsum(row_sums, dtype=np.uint64)
    # The accumulator at row r is running[r] minus running just before the last clear at or before r.
    rows = np.arange(len(row_sums))
    last_clear = np.maximum.accumulate(np.where(clear, rows, -1))
    before_clear = np.where(last_clear > 0, running[np.maximum(last_clear - 1, 0)], np.uint64(0))
    accumulator = running - before_clear
    return wrap(accumulator[read], params["acc_width"], params["signed"])


def _dense_pe_float(a, b, clear, read, fmt, partials):
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    read = np.asarray(read, dtype=bool)
    if a.shape[0] == 0:
        return np.zeros(0, dtype=np.uint32)
    row_sums = fp32_sum_tree(fp_mul_exact(a, b, fmt), axis=1)
    return fp32_accumulate(row_sums, clear, partials, read)
