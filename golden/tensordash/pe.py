"""Golden models of the TensorDash PE and tile: bit-exact results and exact cycle counts."""
import numpy as np

from ..dense_pe import dense_pe
from .core import pad_rows, run_cores
from .pattern import resolve_pattern

__all__ = ["GOLDEN_MACS", "pad_stream", "td_pe", "td_pe_cycles", "td_tile", "td_tile_cycles"]

#: Golden model of each MAC unit (:data:`trainforge.hw.tensordash.mac.MAC_UNITS`), dense-PE signature.
GOLDEN_MACS = {"integer": dense_pe}


def pad_stream(operands, clear, read, depth):
    """Pad a stream with zero rows without flags up to whole groups of ``depth`` rows.

    Parameters
    ----------
    operands : sequence of ndarray, each of shape (T, ...)
    clear, read : ndarray of bool, shape (T,)

    Returns
    -------
    tuple
        The padded operands, then ``clear`` and ``read``.
    """
    total = len(clear)
    extra = pad_rows(total, depth) - total
    padded = [np.concatenate([np.asarray(x), np.zeros((extra,) + np.shape(x)[1:], dtype=np.asarray(x).dtype)])
              for x in operands]
    flags = [np.concatenate([np.asarray(f, dtype=bool), np.zeros(extra, dtype=bool)]) for f in (clear, read)]
    return (*padded, *flags)


def td_pe(a, b, clear, read, *, mac="integer", **params):
    """Results of ``td_pe``: those of the dense PE on the same rows (TensorDash only skips zero products).

    Parameters are those of :func:`trainforge.golden.dense_pe.dense_pe`; the
    TensorDash parameters (lanes, depth, pattern, mode) are accepted and
    change only the timing.
    """
    return GOLDEN_MACS[mac](a, b, clear, read, **params)


def td_pe_cycles(a, b, clear, read, *, lanes=4, depth=4, pattern="default", mode="both", record=False, **_):
    """Cycle model of ``td_pe`` over one stream (padded to whole groups).

    Returns
    -------
    CoreRun
        ``cycles``, ``macs`` and, with ``record``, ``read_cycles`` and ``multiplicity`` for core 0.
    """
    pattern = resolve_pattern(pattern, lanes, depth)
    a, b, clear, read = pad_stream((a, b), clear, read, depth)
    effectual = np.asarray(b) != 0
    if mode == "both":
        effectual &= np.asarray(a) != 0
    return run_cores(effectual[None, None], read, clear, pattern, depth, record=record)


def td_tile(a, b, clear, read, *, mac="integer", acc_width=32, signed=True, **_):
    """Results of ``td_tile``: one ``rows`` x ``cols`` array per ``read`` row.

    Parameters
    ----------
    a : array_like, shape (T, cols, lanes)
    b : array_like, shape (T, rows, lanes)
    clear, read : array_like of bool, shape (T,)

    Returns
    -------
    ndarray, shape (reads, rows, cols)
    """
    a = np.asarray(a)
    b = np.asarray(b)
    rows, cols = b.shape[1], a.shape[1]
    out = np.zeros((int(np.sum(read)), rows, cols),
                   dtype=np.int64 if signed else np.uint64)
    for r in range(rows):
        for c in range(cols):
            out[:, r, c] = GOLDEN_MACS[mac](a[:, c], b[:, r], clear, read, acc_width=acc_width, signed=signed)
    return out


def td_tile_cycles(a, b, clear, read, *, lanes=4, depth=4, pattern="default", record=False, **_):
    """Cycle model of ``td_tile`` (B-only skipping, rows synchronized) over one stream."""
    pattern = resolve_pattern(pattern, lanes, depth)
    a, b, clear, read = pad_stream((a, b), clear, read, depth)
    effectual = np.moveaxis(np.asarray(b) != 0, 1, 0)  # (rows, T, lanes)
    return run_cores(effectual[None], read, clear, pattern, depth, record=record)
