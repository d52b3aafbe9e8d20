"""Golden and cycle models of the ring of ``2 x C`` cores: all-gather, reduce-scatter, two-core GEMV.

The cores form a unidirectional systolic ring: core ``k`` sends to core
``(k + 1) % P`` (``P = 2C``); a word takes one cycle per hop, and a link
carries ``n_r`` words per cycle (one per row bus of the sending core).

Both collectives are the ring algorithms of Chan et al. (the paper's [24]):
``P - 1`` steps, in each of which every core sends one of the ``P`` chunks to
its neighbour. Each step costs the chunk's transfer cycles plus one hop, so

``cycles = (P - 1) * (ceil(chunk / n_r) + HOP_CYCLES)``,

where ``chunk = ceil(size / P)``. Without the hop latency and the rounding
this is the paper's ``(n b - n b / P) / n_r``.
"""
import numpy as np

from ..dense_pe import wrap
from . import core

__all__ = ["HOP_CYCLES", "chunk_bounds", "all_gather", "reduce_scatter", "collective_cycles",
           "two_core_gemv_forward", "two_core_gemv_backward"]

#: Cycles for a word to move from one core to its neighbour.
HOP_CYCLES = 1


def chunk_bounds(size, cores):
    """``(start, stop)`` of each core's chunk of a ``size``-element vector (the first chunks are the larger)."""
    counts = np.full(cores, size // cores)
    counts[:size % cores] += 1
    edges = np.concatenate(([0], np.cumsum(counts)))
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def all_gather(chunks):
    """Every core ends with the concatenation of all cores' chunks.

    Parameters
    ----------
    chunks : list of array_like
        ``chunks[k]`` is core ``k``'s block ``Y_k``.

    Returns
    -------
    list of numpy.ndarray
        One (identical) gathered array per core.
    """
    gathered = np.concatenate([np.asarray(chunk) for chunk in chunks])
    return [gathered.copy() for _ in chunks]


def reduce_scatter(partials, *, acc_width=32):
    """Core ``k`` ends with chunk ``k`` of the sum of all cores' partial vectors (wrapping sums).

    Parameters
    ----------
    partials : array_like, shape (P, size)
        Core ``k``'s partial output ``X_k``.

    Returns
    -------
    list of numpy.ndarray
        ``P`` chunks, by :func:`chunk_bounds`.
    """
    partials = np.asarray(partials, dtype=np.int64)
    total = wrap(partials.astype(np.uint64).sum(axis=0, dtype=np.uint64), acc_width, True)
    return [total[start:stop] for start, stop in chunk_bounds(partials.shape[1], partials.shape[0])]


def collective_cycles(size, cores, n_r):
    """Cycles of a ring all-gather or reduce-scatter of ``size`` elements over ``cores`` cores."""
    if cores == 1:
        return 0
    chunk = -(-int(size) // cores)
    return (cores - 1) * (-(-chunk // n_r) + HOP_CYCLES)


def two_core_gemv_forward(weights, x, *, n_r=4, acc_width=32, reduction="bus", overlap=False, **_):
    """Fig. 4(a, c): each core holds a row panel of ``W`` (half of the inputs) and reduces internally;
    core 0 passes its partial output to core 1, which adds it.

    Returns
    -------
    y : numpy.ndarray
        The output, wrapped to ``acc_width``.
    cycles : int
        Both cores' GEMVs in parallel, the ``Nb`` output words over one hop, and one add cycle per word.
    """
    weights = np.asarray(weights, dtype=np.int64)
    half = core.blocks(weights.shape[0], n_r) // 2 * n_r or weights.shape[0]
    panels = [weights[:half], weights[half:]]
    inputs = [np.asarray(x)[:half], np.asarray(x)[half:]]
    partial = [core.gemv_forward(panel, vector, n_r=n_r, acc_width=acc_width)[1].reshape(-1)
               for panel, vector in zip(panels, inputs) if panel.shape[0]]
    y = wrap(np.sum([p.astype(np.uint64) for p in partial], axis=0, dtype=np.uint64), acc_width, True)
    mb = max(core.blocks(panel.shape[0], n_r) for panel in panels if panel.shape[0])
    nb = core.blocks(weights.shape[1], n_r)
    schedule = core.schedule(core.OP_GEMV_FORWARD, mb, nb, n_r=n_r, reduction=reduction, overlap=overlap)
    cycles = schedule.issue_cycles + core.COMMAND_LATENCY + HOP_CYCLES + 1
    return y[:weights.shape[1]], cycles


def two_core_gemv_backward(weights, e, *, n_r=4, acc_width=32, reduction="bus", overlap=False, **_):
    """Fig. 4(b, d): ``e`` is broadcast to both cores; each reduces within itself and produces its part of ``d``.

    Returns
    -------
    d : numpy.ndarray
    cycles : int
        One hop for the broadcast of ``e`` to the second core, then both GEMVs in parallel.
    """
    weights = np.asarray(weights, dtype=np.int64)
    half = core.blocks(weights.shape[0], n_r) // 2 * n_r or weights.shape[0]
    parts = [core.gemv_backward(panel, e, n_r=n_r, acc_width=acc_width)[1].reshape(-1)[:panel.shape[0]]
             for panel in (weights[:half], weights[half:]) if panel.shape[0]]
    mb = max(core.blocks(size, n_r) for size in (half, weights.shape[0] - half) if size)
    nb = core.blocks(weights.shape[1], n_r)
    schedule = core.schedule(core.OP_GEMV_BACKWARD, mb, nb, n_r=n_r, reduction=reduction, overlap=overlap)
    return np.concatenate(parts), HOP_CYCLES + schedule.issue_cycles + core.COMMAND_LATENCY
