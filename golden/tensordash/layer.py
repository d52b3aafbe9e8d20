"""Layer model: the three training operations of a layer mapped onto the TensorDash tile (paper, Section II, Table II).

Tensors (a fully connected layer is the 1 x 1 convolution of 2-D tensors):

- activations ``A``: (N, C, H, W), the layer's input;
- weights ``W``: (F, C, KY, KX);
- gradients ``G``: (N, F, OH, OW), the gradient of the layer's output (after
  the activation function's backward step, so ReLU zeros show in it).

Every operation is *lowered* to two operand matrices sharing one reduction
axis ``K``: ``b`` (targeted, sparse side) with one row per B dot-product
operand and ``a`` (dense side) with one row per A operand; the operation's
result is ``b @ a.T`` folded back to a tensor (:class:`Lowered`).

- ``AxW`` (forward, Eq. 4): B = A windows, one row per (n, oy, ox); A side =
  filters, one row per f; reduction over (ky, kx, c).
- ``GxW`` (input gradient, Eq. 6): B = windows of G dilated by the stride and
  padded by ``K - 1 - padding``, one row per (n, y, x); A side = the filters
  reconstructed channel-wise and rotated by 180 degrees, one row per c;
  reduction over (ky, kx, f).
- ``GxA`` (weight gradient, Eq. 8): B = G maps, one row per f (or A patches,
  one row per (c, ky, kx)); A side = the other; reduction over (n, oy, ox).

``GxA`` targets ``G`` or ``A``, whichever tensor has the larger fraction of
zeros (ties go to ``G``), as Section II decides it while the tensors are made.

Mapping onto an ``rows`` x ``cols`` tile (rules, exactly):

- The reduction of every B/A row pair is cut into stream rows of ``lanes``
  consecutive values; the last row is padded with zeros.
- B rows are taken ``rows`` at a time (one per PE row; missing rows of the
  last block are all-zero streams), A rows ``cols`` at a time. Each (B block,
  A block) pair is one tile pass; dot products longer than ``max_rows`` are
  cut into ``ceil(T / max_rows)`` consecutive partial dot products of
  ``ceil(T / parts)`` rows (the last shorter), whose sums are added.
- The passes run back to back in one stream (B block outer, A block, then
  part): each dot product ends on a ``read`` row and the next starts on a
  ``clear`` row, so no lookahead crosses them and a pass takes exactly its
  stand-alone cycles until its ``read`` row drains (:mod:`.core`). Its
  TensorDash cycles depend only on its B block (B-only skipping), so each B
  block is simulated once and counted once per A block.
- Dense cycles: one stream row per cycle, the same passes.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .core import pad_rows, run_cores
from ...spec.tensordash import TILE_PARAMS, resolve_pattern

__all__ = ["OPERATIONS", "Lowered", "LayerCycles", "lower", "lanes_stream", "layer_cycles", "pass_cycles", "tile_program",
           "assemble", "direct_conv", "direct_input_gradient", "direct_weight_gradient"]

#: The three training operations, in Table II order.
OPERATIONS = ("AxW", "GxW", "GxA")


@dataclass
class Lowered:
    """One operation as two operand matrices on a common reduction axis.

    Attributes
    ----------
    operation : str
        ``"AxW"``, ``"GxW"`` or ``"GxA"``.
    targeted : str
        Tensor on the B (skipping) side: ``"A"`` or ``"G"``.
    b : ndarray, shape (rows_b, K)
        Targeted operand.
    a : ndarray, shape (rows_a, K)
        Other operand.
    fold : callable
        Maps ``b @ a.T`` (rows_b, rows_a) to the operation's result tensor.
    """
    operation: str
    targeted: str
    b: np.ndarray
    a: np.ndarray
    fold: Callable


@dataclass
class LayerCycles:
    """Cycle counts of one operation on the tile.

    Attributes
    ----------
    dense, tensordash : int
        Cycles of the dense tile and of the TensorDash tile.
    macs : int
        Products of the operation (``rows_b * rows_a * K``).
    effectual_fraction : float
        Fraction of the targeted operand that is non-zero (over ``rows_b x K``).
    """
    dense: int
    tensordash: int
    macs: int
    effectual_fraction: float

    @property
    def speedup(self):
        return self.dense / self.tensordash

    @property
    def potential(self):
        """All MACs over the MACs left after skipping zeros of the targeted operand (paper, Fig. 1)."""
        return 1.0 / max(self.effectual_fraction, 1e-12)


def _windows(x, ky, kx, stride):
    """(N, C, H, W) -> (N, C, OH, OW, KY, KX) sliding windows (views, no copy)."""
    return sliding_window_view(x, (ky, kx), axis=(2, 3))[:, :, ::stride, ::stride]


def _as_4d(activations, weights, gradients):
    """Fully connected tensors as 1 x 1 convolutions; returns the tensors and whether they were 2-D."""
    if np.ndim(weights) == 2:
        return (np.asarray(activations)[:, :, None, None], np.asarray(weights)[:, :, None, None],
                np.asarray(gradients)[:, :, None, None], True)
    return np.asarray(activations), np.asarray(weights), np.asarray(gradients), False


def lower(operation, activations, weights, gradients, stride=1, padding=0):
    """Lower one training operation of a layer to operand matrices (module docstring table).

    Parameters
    ----------
    operation : str
        ``"AxW"``, ``"GxW"`` or ``"GxA"``.
    activations : ndarray, (N, C, H, W) or (N, C)
    weights : ndarray, (F, C, KY, KX) or (F, C)
    gradients : ndarray, (N, F, OH, OW) or (N, F)
        Only the shape is used by ``AxW``; only the shape of ``activations`` by ``GxW``.
    stride, padding : int
        Of the forward convolution (1 and 0 for a fully connected layer).

    Returns
    -------
    Lowered
    """
    acts, wts, grads, flat = _as_4d(activations, weights, gradients)
    n, c, h, w = acts.shape
    f, _, ky, kx = wts.shape
    oh, ow = (h + 2 * padding - ky) // stride + 1, (w + 2 * padding - kx) // stride + 1
    if grads.shape != (n, f, oh, ow):
        raise ValueError(f"gradients of shape {grads.shape} do not match the layer output {(n, f, oh, ow)}")
    if operation == "AxW":
        padded = np.pad(acts, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        b = _windows(padded, ky, kx, stride).transpose(0, 2, 3, 4, 5, 1).reshape(n * oh * ow, ky * kx * c)
        a = wts.transpose(0, 2, 3, 1).reshape(f, ky * kx * c)

        def fold(out):
            out = out.reshape(n, oh, ow, f).transpose(0, 3, 1, 2)
            return out[:, :, 0, 0] if flat else out
        return Lowered(operation, "A", b, a, fold)
    if operation == "GxW":
        dilated = np.zeros((n, f, (oh - 1) * stride + 1, (ow - 1) * stride + 1), dtype=grads.dtype)
        dilated[:, :, ::stride, ::stride] = grads
        low_y, low_x = ky - 1 - padding, kx - 1 - padding
        high_y = h - 1 - (oh - 1) * stride + padding
        high_x = w - 1 - (ow - 1) * stride + padding
        padded = np.pad(dilated, ((0, 0), (0, 0), (low_y, high_y), (low_x, high_x)))
        b = _windows(padded, ky, kx, 1).transpose(0, 2, 3, 4, 5, 1).reshape(n * h * w, ky * kx * f)
        a = wts[:, :, ::-1, ::-1].transpose(1, 2, 3, 0).reshape(c, ky * kx * f)

        def fold(out):
            out = out.reshape(n, h, w, c).transpose(0, 3, 1, 2)
            return out[:, :, 0, 0] if flat else out
        return Lowered(operation, "G", b, a, fold)
    if operation == "GxA":
        padded = np.pad(acts, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        patches = _windows(padded, ky, kx, stride).transpose(1, 4, 5, 0, 2, 3).reshape(c * ky * kx, n * oh * ow)
        maps = grads.transpose(1, 0, 2, 3).reshape(f, n * oh * ow)
        shape = (f, c) if flat else (f, c, ky, kx)
        if np.mean(acts == 0) > np.mean(grads == 0):
            return Lowered(operation, "A", patches, maps, lambda out: out.T.reshape(shape))
        return Lowered(operation, "G", maps, patches, lambda out: out.reshape(shape))
    raise ValueError(f"unknown operation {operation!r}; known: {', '.join(OPERATIONS)}")


def lanes_stream(matrix, lanes):
    """(rows, K) -> (rows, ceil(K / lanes), lanes): the reduction cut into stream rows, zero-padded."""
    matrix = np.asarray(matrix)
    count, length = matrix.shape
    total = -(-length // lanes) * lanes
    if total != length:
        matrix = np.concatenate([matrix, np.zeros((count, total - length), dtype=matrix.dtype)], axis=1)
    return matrix.reshape(count, total // lanes, lanes)


def _parts(total, max_rows):
    """Lengths of the partial dot products a reduction of ``total`` stream rows is cut into."""
    parts = -(-total // max_rows)
    size = -(-total // parts)
    return [min(size, total - k * size) for k in range(parts) if total - k * size > 0]


def _block_rows(b_stream, rows):
    """(rows_b, T, lanes) -> (blocks, rows, T, lanes), padding the last block with all-zero streams."""
    count = b_stream.shape[0]
    blocks = -(-count // rows)
    extra = blocks * rows - count
    if extra:
        b_stream = np.concatenate([b_stream, np.zeros((extra,) + b_stream.shape[1:], dtype=b_stream.dtype)])
    return b_stream.reshape((blocks, rows) + b_stream.shape[1:])


def _stand_alone_cycles(effectual, pattern, depth):
    """Cycles until the ``read`` row of one dot product per core drains, (N, rows, T, lanes) -> (N,)."""
    length = effectual.shape[2]
    total = pad_rows(length, depth)
    if total != length:
        effectual = np.concatenate(
            [effectual, np.zeros(effectual.shape[:2] + (total - length,) + effectual.shape[3:], bool)], axis=2)
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    clear[0], read[length - 1] = True, True
    run = run_cores(effectual, read, clear, pattern, depth)
    # Zero rows padding a stream to whole groups take one more cycle after the read row drains.
    return run.cycles - (total != length)


def layer_cycles(lowered, rows=TILE_PARAMS["rows"].default, cols=TILE_PARAMS["cols"].default, lanes=TILE_PARAMS["lanes"].default, depth=TILE_PARAMS["depth"].default,
                 pattern=TILE_PARAMS["pattern"].default, max_rows=1024):
    """Dense and TensorDash cycles of one lowered operation on a ``rows`` x ``cols`` tile.

    Parameters
    ----------
    lowered : Lowered
    rows, cols, lanes, depth : int
        Tile shape, lanes per PE and staging buffer depth (defaults: :data:`~trainforge.spec.tensordash.TILE_PARAMS`).
    pattern : str or sequence of (int, int)
    max_rows : int
        Longest dot product, in stream rows, before it is cut into partial sums.

    Returns
    -------
    LayerCycles
    """
    pattern = resolve_pattern(pattern, lanes, depth)
    effectual = lanes_stream(lowered.b != 0, lanes)
    count_b, total, _ = effectual.shape
    a_blocks = -(-lowered.a.shape[0] // cols)
    blocks = _block_rows(effectual, rows)
    tensordash, start = 0, 0
    for length in _parts(total, max_rows):
        tensordash += int(_stand_alone_cycles(blocks[:, :, start:start + length], pattern, depth).sum())
        start += length
    macs = count_b * lowered.a.shape[0] * lowered.b.shape[1]
    return LayerCycles(dense=len(blocks) * a_blocks * total, tensordash=tensordash * a_blocks, macs=int(macs),
                       effectual_fraction=float(np.mean(lowered.b != 0)) if lowered.b.size else 1.0)


def pass_cycles(lowered, rows=TILE_PARAMS["rows"].default, cols=TILE_PARAMS["cols"].default,
                lanes=TILE_PARAMS["lanes"].default, depth=TILE_PARAMS["depth"].default,
                pattern=TILE_PARAMS["pattern"].default, max_rows=1024):
    """Dense and TensorDash cycles of every tile pass of one lowered operation, in the order they run.

    The passes are :func:`tile_program`'s (B block outer, A block, then part), each ending on its ``read``
    row; their sums are :func:`layer_cycles`' totals. What a pass costs between two ``read`` rows is what
    a result reduction serialised over reads would see.

    Returns
    -------
    tensordash, dense : ndarray of int64, shape (passes,)
        Scheduling cycles of each pass up to its ``read`` row, and its stream rows (one per dense cycle).
    """
    pattern = resolve_pattern(pattern, lanes, depth)
    effectual = lanes_stream(lowered.b != 0, lanes)
    _, total, _ = effectual.shape
    a_blocks = -(-lowered.a.shape[0] // cols)
    blocks = _block_rows(effectual, rows)
    parts = _parts(total, max_rows)
    starts = np.cumsum([0] + parts[:-1])
    # (B blocks, parts): each B block's part is simulated once and runs once per A block.
    cycles = np.stack([_stand_alone_cycles(blocks[:, :, start:start + length], pattern, depth)
                       for start, length in zip(starts, parts)], axis=1)
    tensordash = np.repeat(cycles[:, None, :], a_blocks, axis=1).reshape(-1).astype(np.int64)
    dense = np.tile(np.asarray(parts, dtype=np.int64), len(blocks) * a_blocks)
    return tensordash, dense


def tile_program(lowered, rows=TILE_PARAMS["rows"].default, cols=TILE_PARAMS["cols"].default, lanes=TILE_PARAMS["lanes"].default,
                 depth=TILE_PARAMS["depth"].default, max_rows=1024):
    """The whole operation as one tile stream, for :func:`~.pe.td_tile` and the RTL (small layers only).

    Returns
    -------
    a : ndarray, shape (T, cols, lanes)
    b : ndarray, shape (T, rows, lanes)
    clear, read : ndarray of bool, shape (T,)
    passes : list of (int, int)
        (B block, A block) of every ``read`` row, in order.
    """
    b_blocks = _block_rows(lanes_stream(lowered.b, lanes), rows)
    a_blocks = _block_rows(lanes_stream(lowered.a, lanes), cols)
    parts = _parts(b_blocks.shape[2], max_rows)
    a_rows, b_rows, clear, read, passes = [], [], [], [], []
    for i, b_block in enumerate(b_blocks):
        for j, a_block in enumerate(a_blocks):
            start = 0
            for length in parts:
                b_rows.append(b_block[:, start:start + length].transpose(1, 0, 2))
                a_rows.append(a_block[:, start:start + length].transpose(1, 0, 2))
                flags = np.zeros((2, length), bool)
                flags[0, 0], flags[1, -1] = True, True
                clear.append(flags[0])
                read.append(flags[1])
                passes.append((i, j))
                start += length
    return (np.concatenate(a_rows), np.concatenate(b_rows), np.concatenate(clear), np.concatenate(read), passes)


def assemble(lowered, results, passes, rows=TILE_PARAMS["rows"].default, cols=TILE_PARAMS["cols"].default):
    """Fold the tile's per-``read`` results (reads, rows, cols) into the operation's result tensor."""
    count_b, count_a = lowered.b.shape[0], lowered.a.shape[0]
    out = np.zeros((-(-count_b // rows) * rows, -(-count_a // cols) * cols), dtype=np.asarray(results).dtype)
    for result, (i, j) in zip(results, passes):
        out[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols] += result
    return lowered.fold(out[:count_b, :count_a])


def direct_conv(activations, weights, stride=1, padding=0):
    """Forward convolution (Table II, Eq. 4) by explicit loops over the filter taps: the reference of ``AxW``."""
    n, c, h, w = activations.shape
    f, _, ky, kx = weights.shape
    oh, ow = (h + 2 * padding - ky) // stride + 1, (w + 2 * padding - kx) // stride + 1
    padded = np.pad(activations, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out = np.zeros((n, f, oh, ow), dtype=np.result_type(activations, weights))
    for y in range(ky):
        for x in range(kx):
            tap = padded[:, :, y:y + stride * (oh - 1) + 1:stride, x:x + stride * (ow - 1) + 1:stride]
            out += np.einsum("nchw,fc->nfhw", tap, weights[:, :, y, x])
    return out


def direct_input_gradient(gradients, weights, input_shape, stride=1, padding=0):
    """Input gradient (Eq. 6) by scattering every output gradient back through the filter taps."""
    n, c, h, w = input_shape
    f, _, ky, kx = weights.shape
    _, _, oh, ow = gradients.shape
    padded = np.zeros((n, c, h + 2 * padding, w + 2 * padding), dtype=np.result_type(gradients, weights))
    for y in range(ky):
        for x in range(kx):
            padded[:, :, y:y + stride * (oh - 1) + 1:stride, x:x + stride * (ow - 1) + 1:stride] += \
                np.einsum("nfhw,fc->nchw", gradients, weights[:, :, y, x])
    return padded[:, :, padding:padding + h, padding:padding + w]


def direct_weight_gradient(gradients, activations, kernel, stride=1, padding=0):
    """Weight gradient (Eq. 8): for every tap, the output gradients against the shifted activations."""
    ky, kx = kernel
    _, _, oh, ow = gradients.shape
    padded = np.pad(activations, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out = np.zeros((gradients.shape[1], activations.shape[1], ky, kx), dtype=np.result_type(gradients, activations))
    for y in range(ky):
        for x in range(kx):
            tap = padded[:, :, y:y + stride * (oh - 1) + 1:stride, x:x + stride * (ow - 1) + 1:stride]
            out[:, :, y, x] = np.einsum("nfhw,nchw->fc", gradients, tap)
    return out
