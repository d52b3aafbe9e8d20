"""Golden model of :class:`trainforge.hw.neurotrainer.vault.NTVault`: read data (vectorised) and cycles.

Rules: request ``i`` writes ``data[i]`` to word ``address[i] mod depth`` or reads that word; a
read returns the data of the last write to the same word accepted before it, else the
initial contents. Without backpressure, with every request offered from cycle 0, request
``i`` is accepted in cycle ``i * interval`` and a read's data leave in its acceptance cycle
plus ``latency``.
"""
import numpy as np

from ...spec.neurotrainer.vault import PARAMS

__all__ = ["nt_vault"]


_DEFAULTS = PARAMS.defaults


def nt_vault(address, write, data, *, depth=_DEFAULTS["depth"], latency=_DEFAULTS["latency"],
             interval=_DEFAULTS["interval"], memory=None, **_):
    """Read data and their cycles for a request stream.

    Parameters
    ----------
    address, write, data : array_like
        The requests in order (32-bit address, write flag, 32-bit data).
    depth, latency, interval : int
        Block parameters (see :class:`~trainforge.hw.neurotrainer.vault.NTVault`).
    memory : array_like of int, shape (depth,), optional
        Initial contents (zero when not given).

    Returns
    -------
    dict
        ``data`` (uint64): the read data in order; ``cycles`` (int64): their output cycles
        without backpressure; ``memory`` (uint64): the final contents.
    """
    word = np.asarray(address, dtype=np.int64) % depth
    write = np.asarray(write, dtype=bool)
    data = np.asarray(data, dtype=np.int64) & 0xFFFFFFFF
    initial = np.zeros(depth, dtype=np.int64) if memory is None else np.asarray(memory, dtype=np.int64).copy()
    count = len(word)
    # Group the requests by word, in request order within a group; forward-fill the last write.
    order = np.lexsort((np.arange(count), word))
    sorted_word, sorted_write = word[order], write[order]
    position = np.arange(count)
    group_start = np.maximum.accumulate(np.where(np.r_[True, sorted_word[1:] != sorted_word[:-1]], position, 0)) \
        if count else position
    last_write = np.maximum.accumulate(np.where(sorted_write, position, -1)) if count else position
    seen = last_write >= group_start
    value_sorted = np.where(seen, data[order][np.maximum(last_write, 0)], initial[sorted_word])
    value = np.empty(count, dtype=np.int64)
    value[order] = value_sorted
    reads = ~write
    final = initial
    group_end = np.r_[sorted_word[1:] != sorted_word[:-1], True] if count else position.astype(bool)
    last_of_word = last_write[group_end]
    stored = last_of_word[last_of_word >= group_start[group_end]]   # one (the last) write per word
    final[sorted_word[stored]] = data[order][stored]
    return {
        "data": value[reads].astype(np.uint64),
        "cycles": (np.flatnonzero(reads) * interval + latency).astype(np.int64),
        "memory": final.astype(np.uint64),
    }
