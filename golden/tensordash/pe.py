"""Golden models of the TensorDash PE and tile: bit-exact results and exact cycle counts."""
import numpy as np

from ...spec import tensordash as spec
from ..dense_pe import dense_pe
from .core import pad_rows, run_cores

__all__ = ["GOLDEN_MACS", "pad_stream", "td_pe", "td_pe_cycles", "td_tile", "td_tile_cycles"]

#: Golden model of each MAC unit (:data:`trainforge.spec.tensordash.MAC_NAMES`), dense-PE signature.
GOLDEN_MACS = {"integer": dense_pe}


def _resolve(schema, params):
    """``params`` resolved through ``schema``: defaults for those not given, names the schema lacks ignored."""
    return schema.resolve(**{name: value for name, value in params.items() if name in schema.names})


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


def td_pe(a, b, clear, read, **params):
    """Results of ``td_pe``: those of the dense PE on the same rows (TensorDash only skips zero products).

    ``params`` are those of :data:`trainforge.spec.tensordash.PE_PARAMS` (defaults from there, other
    names ignored); ``mac`` picks the golden MAC, ``acc_width`` and ``signed`` shape the result, and the
    TensorDash parameters (lanes, depth, pattern, mode) change only the timing.
    """
    params = _resolve(spec.PE_PARAMS, params)
    return GOLDEN_MACS[params["mac"]](a, b, clear, read, **params)


def td_pe_cycles(a, b, clear, read, *, record=False, **params):
    """Cycle model of ``td_pe`` over one stream (padded to whole groups).

    ``params`` are those of :data:`trainforge.spec.tensordash.PE_PARAMS` (defaults from there, other
    names ignored); ``lanes``, ``depth``, ``pattern`` and ``mode`` set the timing.

    Returns
    -------
    CoreRun
        ``cycles``, ``macs`` and, with ``record``, ``read_cycles`` and ``multiplicity`` for core 0.
    """
    params = _resolve(spec.PE_PARAMS, params)
    pattern = spec.pattern_of(params)
    a, b, clear, read = pad_stream((a, b), clear, read, params["depth"])
    effectual = np.asarray(b) != 0
    if params["mode"] == "both":
        effectual &= np.asarray(a) != 0
    return run_cores(effectual[None, None], read, clear, pattern, params["depth"], record=record)


def td_tile(a, b, clear, read, **params):
    """Results of ``td_tile``: one ``rows`` x ``cols`` array per ``read`` row.

    ``params`` are those of :data:`trainforge.spec.tensordash.TILE_PARAMS` (defaults from there, other
    names ignored); ``mac``, ``acc_width`` and ``signed`` set the arithmetic, the shape comes from the operands.

    Parameters
    ----------
    a : array_like, shape (T, cols, lanes)
    b : array_like, shape (T, rows, lanes)
    clear, read : array_like of bool, shape (T,)

    Returns
    -------
    ndarray, shape (reads, rows, cols)
    """
    params = _resolve(spec.TILE_PARAMS, params)
    a = np.asarray(a)
    b = np.asarray(b)
    rows, cols = b.shape[1], a.shape[1]
    out = np.zeros((int(np.sum(read)), rows, cols),
                   dtype=np.int64 if params["signed"] else np.uint64)
    for r in range(rows):
        for c in range(cols):
            out[:, r, c] = GOLDEN_MACS[params["mac"]](a[:, c], b[:, r], clear, read, acc_width=params["acc_width"],
                                                      signed=params["signed"])
    return out


def td_tile_cycles(a, b, clear, read, *, record=False, **params):
    """Cycle model of ``td_tile`` (B-only skipping, rows synchronized) over one stream.

    ``params`` are those of :data:`trainforge.spec.tensordash.TILE_PARAMS` (defaults from there, other
    names ignored); ``lanes``, ``depth`` and ``pattern`` set the timing, the shape comes from the operands.
    """
    params = _resolve(spec.TILE_PARAMS, params)
    pattern = spec.pattern_of(params)
    a, b, clear, read = pad_stream((a, b), clear, read, params["depth"])
    effectual = np.moveaxis(np.asarray(b) != 0, 1, 0)  # (rows, T, lanes)
    return run_cores(effectual[None], read, clear, pattern, params["depth"], record=record)
