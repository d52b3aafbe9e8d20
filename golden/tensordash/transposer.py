"""Golden model of ``td_transposer``: groups of ``size`` blocks transposed."""
import numpy as np

__all__ = ["transpose_blocks"]


def transpose_blocks(blocks, **_):
    """Output blocks of the transposer for a stream of input blocks.

    Parameters
    ----------
    blocks : array_like, shape (groups * size, size)
        Input blocks in order; every ``size`` consecutive blocks form a group.

    Returns
    -------
    ndarray, shape (groups * size, size)
        For each group, output block ``j`` holds value ``j`` of every input block of the group.
    """
    blocks = np.asarray(blocks)
    size = blocks.shape[1]
    return blocks.reshape(-1, size, size).transpose(0, 2, 1).reshape(-1, size)
