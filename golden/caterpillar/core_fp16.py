"""Golden arithmetic of ``cp_core`` with the half-precision FPU (``mac="fp16"``), in the hardware's order.

Bit-exact with :class:`trainforge.hw.caterpillar.core.CPCore` built with ``mac="fp16"``. The operands (the
weights in the PEs' local SRAMs, the words of ``x``, ``e`` and ``B`` on ``i_data``) are FP16 bit patterns, the
results on ``o_data`` FP32 bit patterns. Every addition is one :func:`trainforge.golden.fp.fp32_add` (round to
nearest even, subnormals flushed, canonical NaN), every product the exact FP32 product of two FP16 operands
(:func:`trainforge.golden.fp.fp_mul_exact`). FP addition is not associative, so the order is part of the rule:

- **PE accumulation** (``partial_sums`` ``P``, :func:`accumulate`): each PE adds its products one per MAC cycle,
  in issue order; with ``P`` 1 from ``+0``: ``acc = (((+0 + p_0) + p_1) + ...)``. With ``P`` of 2, 4, 8 (the
  interleaved accumulator, :mod:`trainforge.golden.caterpillar.pe`) product ``j`` goes to partial ``j mod P``
  (each from ``+0``, in order), the sum is the pairwise tree of the partials, an unwritten one counting as ``+0``:
  ``(q_0 + q_1) + (q_2 + q_3)`` at ``P`` 4. GEMV forward: PE ``(r, c)`` of output ``j`` (``c = j % n_r``) adds
  ``x[ib n_r + r] W[ib n_r + r, j]`` for ``ib = 0 .. Mb - 1``; backward: PE ``(r, c)`` of output ``i``
  (``r = i % n_r``) adds ``e[jb n_r + c] W[i, jb n_r + c]`` for ``jb = 0 .. Nb - 1``; GEMM: ``W[i, p] B[p, q]``
  for ``p = 0 .. Kb n_r - 1``; UPDATE: ``x_s[i] e_s[j]`` for ``s = 0 .. b - 1``.
- **Reduction** of a line's ``n_r`` partial sums into its diagonal PE, numbered by position ``d`` from the
  diagonal (forward: PE ``((c + d) % n_r, c)`` of column ``c``; backward: PE ``(r, (r + d) % n_r)`` of row ``r``):
  ``bus``: ``(((v_0 + v_1) + v_2) + ... + v_{n_r - 1})`` (the diagonal adds the bus senders ``d = 1, 2, ...`` in
  turn) with ``reduction_partials`` 1; with ``R`` of 2, 4, 8 (the interleaved reduction) the rows ``v_0, v_1, ...``
  go to partials ``d mod R`` (each from ``+0``) and the sum is their pairwise tree, as the accumulation:
  ``(v_0 + v_1) + (v_2 + v_3)`` at ``n_r`` 4, ``R`` 4 (each ``v`` added to ``+0`` first); ``tree``: at step ``s = 0, 1, ...`` every position ``d`` that is a multiple of ``2**(s + 1)`` and has a
  partner ``d + 2**s < n_r`` adds it: at ``n_r = 4``, ``(v_0 + v_1) + (v_2 + v_3)``; at ``n_r = 3``,
  ``(v_0 + v_1) + v_2``.
- **GEMM** results are the PEs' sums, no reduction.
- **UPDATE write-back** of a weight ``W`` (FP16) with the batch's sum ``P`` (FP32): :func:`updated_weight`.

Padding (zero words ``0x0000``) takes part like any operand: ``+0`` products are signed zeros, and a padding
weight stays ``+0`` in an UPDATE unless a non-finite operand meets it (``Inf * 0`` is NaN).
"""
import numpy as np

from ...errors import ParameterError, ProgramError
from ...spec.caterpillar import FP16_MAC, reduction_cycles
from ..fp import fp16_to_fp32, fp32_accumulate, fp32_add, fp32_scale_down, fp32_to_fp16, fp_mul_exact

__all__ = ["accumulate", "reduce_line", "updated_weight", "gemv_forward", "gemv_backward", "gemm", "update"]

_FP16 = FP16_MAC["operand"]


def _fp16(values):
    """FP16 bit patterns (uint16 view of any 16-bit integers, signed or not)."""
    return (np.asarray(values, dtype=np.int64) & 0xFFFF).astype(np.uint16)


def _signed32(bits):
    """FP32 bit patterns as the signed 32-bit integers of the ports' lanes."""
    return np.asarray(bits, dtype=np.uint32).view(np.int32).astype(np.int64)


def _signed16(bits):
    return np.asarray(bits, dtype=np.uint16).view(np.int16).astype(np.int64)


def _padded(matrix, rows, cols):
    matrix = _fp16(matrix)
    padded = np.zeros((rows, cols), dtype=np.uint16)
    padded[:matrix.shape[0], :matrix.shape[1]] = matrix
    return padded


def _blocks(size, n_r):
    return max(1, -(-int(size) // n_r))


def accumulate(products, partial_sums=1):
    """A PE's accumulator after its MACs along axis 0 (FP32 bits): ``(((+0 + p_0) + p_1) + ...)`` with
    ``partial_sums`` 1, else the interleaved order of ``partial_sums`` partials (module docstring)."""
    products = np.asarray(products, dtype=np.uint32)
    if partial_sums == 1:
        total = np.zeros(products.shape[1:], dtype=np.uint32)
        for product in products:
            total = fp32_add(total, product)
        return total
    return _interleaved_total(products, partial_sums)


def _interleaved_total(rows, partials):
    """The interleaved accumulator's value after its last row (``rows`` along axis 0, the first a clear)."""
    clear = np.zeros(len(rows), dtype=bool)
    clear[0] = True
    read = np.zeros(len(rows), dtype=bool)
    read[-1] = True
    return fp32_accumulate(rows, clear, partials, read=read)[0]


def reduce_line(values, reduction, reduction_partials=1):
    """The diagonal PE's sum of a line's partial sums ``values[d]`` (axis 0: the position ``d`` from the
    diagonal), in the order of ``reduction`` and ``reduction_partials`` (module docstring)."""
    values = [np.asarray(value, dtype=np.uint32) for value in values]
    n_r = len(values)
    if reduction == "bus":
        if reduction_partials != 1:
            return _interleaved_total(np.stack(values), reduction_partials)
        total = values[0]
        for value in values[1:]:
            total = fp32_add(total, value)
        return total
    if reduction_partials != 1:
        raise ParameterError(f"parameter 'reduction_partials' = {reduction_partials} is invalid with reduction "
                             f"'tree'; allowed: 1")
    for step in range(reduction_cycles(n_r, reduction)):
        stride = 1 << step
        for position in range(0, n_r, 2 * stride):
            if position + stride < n_r:
                values[position] = fp32_add(values[position], values[position + stride])
    return values[0]


def updated_weight(weight_bits, product_bits, shift):
    """The weight an ``fp16`` UPDATE writes back: ``round16(W - P * 2**-shift)``.

    1. ``P * 2**-shift``: the exponent of the FP32 sum ``P`` drops by ``shift``, exactly; a result below FP32's
       smallest normal is flushed to a zero of its sign (:func:`~trainforge.golden.fp.fp32_scale_down`);
    2. ``W`` (FP16) widened to FP32, exactly (:func:`~trainforge.golden.fp.fp16_to_fp32`), and the scaled sum
       subtracted: one FP32 addition of the negated term, rounded to nearest even
       (:func:`~trainforge.golden.fp.fp32_add`);
    3. that difference rounded to FP16, nearest even, results below ``2**-14`` flushed to a signed zero,
       overflow to ``+-Inf`` (:func:`~trainforge.golden.fp.fp32_to_fp16`).

    Two roundings (to FP32, then to FP16): the FP32 adder of the PE is reused for the subtraction.

    Parameters
    ----------
    weight_bits : array_like of int
        FP16 bit patterns.
    product_bits : array_like of int
        FP32 bit patterns of the sums ``P``.
    shift : int
        The command's ``shift``.

    Returns
    -------
    numpy.ndarray of uint16
    """
    scaled = fp32_scale_down(np.asarray(product_bits, dtype=np.int64) & 0xFFFFFFFF, shift)
    negated = scaled ^ np.uint32(1 << 31)
    return fp32_to_fp16(fp32_add(fp16_to_fp32(_fp16(weight_bits)), negated))


def _products(first, second):
    return fp_mul_exact(first, second, _FP16)


def gemv_forward(weights, x, n_r, reduction, partial_sums=1, reduction_partials=1):
    """``y = x^T W``: ``(inputs, outputs)`` as :func:`trainforge.golden.caterpillar.core.gemv_forward`, FP16
    inputs (signed 16-bit lanes) and FP32 outputs (signed 32-bit lanes)."""
    weights = _fp16(weights)
    mb, nb = _blocks(weights.shape[0], n_r), _blocks(weights.shape[1], n_r)
    padded = _padded(weights, mb * n_r, nb * n_r)
    vector = np.zeros(mb * n_r, dtype=np.uint16)
    flat = _fp16(x).reshape(-1)
    vector[:flat.size] = flat
    # products[ib, r, j] = x[ib n_r + r] * W[ib n_r + r, j]; PE (r, j % n_r) sums them over ib.
    products = _products(vector.reshape(mb, n_r, 1), padded.reshape(mb, n_r, nb * n_r))
    partial = accumulate(products, partial_sums)  # (n_r, Nb n_r): row r of PE (r, j % n_r)
    columns = np.arange(nb * n_r)
    lines = [partial[(columns % n_r + d) % n_r, columns] for d in range(n_r)]
    y = reduce_line(lines, reduction, reduction_partials)
    return _signed16(vector).reshape(mb, n_r), _signed32(y).reshape(nb, n_r)


def gemv_backward(weights, e, n_r, reduction, partial_sums=1, reduction_partials=1):
    """``d = W e`` with the weights in place: ``(inputs, outputs)``, FP16 in, FP32 out."""
    weights = _fp16(weights)
    mb, nb = _blocks(weights.shape[0], n_r), _blocks(weights.shape[1], n_r)
    padded = _padded(weights, mb * n_r, nb * n_r)
    vector = np.zeros(nb * n_r, dtype=np.uint16)
    flat = _fp16(e).reshape(-1)
    vector[:flat.size] = flat
    # products[jb, i, c] = e[jb n_r + c] * W[i, jb n_r + c]; PE (i % n_r, c) sums them over jb.
    products = _products(vector.reshape(nb, 1, n_r), padded.reshape(mb * n_r, nb, n_r).transpose(1, 0, 2))
    partial = accumulate(products, partial_sums)  # (Mb n_r, n_r)
    rows = np.arange(mb * n_r)
    lines = [partial[rows, (rows % n_r + d) % n_r] for d in range(n_r)]
    d = reduce_line(lines, reduction, reduction_partials)
    return _signed16(vector).reshape(nb, n_r), _signed32(d).reshape(mb, n_r)


def gemm(weights, b, n_r, partial_sums=1):
    """``C = W B`` by rank-1 updates: ``(inputs, outputs)`` as :func:`trainforge.golden.caterpillar.core.gemm`."""
    weights, b = _fp16(weights), _fp16(b)
    if weights.shape[1] != b.shape[0]:
        raise ProgramError(f"inner dimensions differ: W is {weights.shape}, B is {b.shape}")
    mb, kb, qb = _blocks(weights.shape[0], n_r), _blocks(weights.shape[1], n_r), _blocks(b.shape[1], n_r)
    padded_w = _padded(weights, mb * n_r, kb * n_r)
    padded_b = _padded(b, kb * n_r, qb * n_r)
    # products[p, i, q] = W[i, p] * B[p, q], summed over p in order by PE (i % n_r, q % n_r).
    products = _products(padded_w.T[:, :, None], padded_b[:, None, :])
    c = _signed32(accumulate(products, partial_sums))
    b_panels = _signed16(padded_b).reshape(kb * n_r, qb, n_r).transpose(1, 0, 2)
    inputs = np.broadcast_to(b_panels[:, None], (qb, mb, kb * n_r, n_r)).reshape(-1, n_r)
    outputs = c.reshape(mb, n_r, qb, n_r).transpose(2, 0, 1, 3).reshape(-1, n_r)
    return inputs, outputs


def update(weights, x, e, shift, n_r, partial_sums=1):
    """The rank-``b`` update in place: ``(inputs, updated)`` as :func:`trainforge.golden.caterpillar.core.update`.

    ``P[i, j]`` is the PE's sum of ``x_s[i] e_s[j]`` over ``s`` in order (from ``+0``); the updated weight is
    :func:`updated_weight`. ``updated`` is the padded matrix (``Mb n_r x Nb n_r``, signed 16-bit lanes): a
    padding weight changes only if a non-finite operand meets a padding zero.
    """
    weights = _fp16(weights)
    m, n = weights.shape
    x, e = np.atleast_2d(_fp16(x)), np.atleast_2d(_fp16(e))
    if x.shape[0] != e.shape[0] or x.shape[1] > m or e.shape[1] > n:
        raise ProgramError(f"x {x.shape} and e {e.shape} do not match W {weights.shape} (b x m and b x n)")
    batch = x.shape[0]
    mb, nb = _blocks(m, n_r), _blocks(n, n_r)
    x_padded = np.zeros((batch, mb * n_r), dtype=np.uint16)
    x_padded[:, :x.shape[1]] = x
    e_padded = np.zeros((batch, nb * n_r), dtype=np.uint16)
    e_padded[:, :e.shape[1]] = e
    inputs = np.concatenate([
        _signed16(x_padded).reshape(batch, mb, n_r).transpose(1, 0, 2).reshape(-1, n_r),
        _signed16(e_padded).reshape(batch, nb, n_r).transpose(1, 0, 2).reshape(-1, n_r)])
    products = accumulate(_products(x_padded[:, :, None], e_padded[:, None, :]), partial_sums)
    updated = updated_weight(_padded(weights, mb * n_r, nb * n_r), products, int(shift))
    return inputs, _signed16(updated)
