"""Golden model of the TensorDash hierarchical scheduler (paper, Section III-A, Fig. 6): vectorised numpy.

For one candidate vector ``Z`` (``depth`` rows by ``lanes`` lanes; a bit is
set where a pair is effectual and not yet multiplied) the scheduler gives
every lane a select ``MS_i``, the index of its chosen option in the pattern,
and ``AS``, the number of leading rows left fully drained.

Exact rule, which the RTL implements bit for bit:

1. Rows that are not *visible* (absent, or beyond a dot-product boundary,
   see :mod:`.core`) are removed from ``Z`` first.
2. The levels of :func:`~trainforge.spec.tensordash.lane_levels` decide in order. A lane takes
   the first option of the pattern whose slot is still set in ``Z``; its
   choice is cleared from ``Z`` before the next level. Lanes of one level
   have disjoint slots, so deciding them at once equals deciding them one by
   one, and no pair is ever chosen twice.
3. A lane with no option left is *idle*: ``active_i = 0`` and ``MS_i = 0``;
   the datapath multiplies nothing on it.
4. ``AS`` counts the leading rows that are visible and have no bit left.
"""
from dataclasses import dataclass

import numpy as np

from ...spec.tensordash import lane_levels, option_slots

__all__ = ["Schedule", "schedule"]


@dataclass
class Schedule:
    """One scheduling decision per candidate vector (all arrays share the leading batch shape).

    Attributes
    ----------
    ms : ndarray of int64, shape (..., lanes)
        Option index chosen per lane (0 when idle).
    active : ndarray of bool, shape (..., lanes)
        The lane multiplies a pair this cycle.
    chosen : ndarray of bool, shape (..., depth, lanes)
        The slots taken.
    remaining : ndarray of bool, shape (..., depth, lanes)
        Visible candidates not taken.
    advance : ndarray of int64, shape (...)
        ``AS``: leading visible rows with nothing remaining.
    """
    ms: np.ndarray
    active: np.ndarray
    chosen: np.ndarray
    remaining: np.ndarray
    advance: np.ndarray


def schedule(candidates, pattern, visible=None, levels=None):
    """Schedule any batch of candidate vectors.

    Parameters
    ----------
    candidates : array_like of bool, shape (..., depth, lanes)
        ``Z``: effectual pairs not yet multiplied.
    pattern : sequence of (int, int)
        A validated pattern (:func:`~trainforge.spec.tensordash.validate_pattern`).
    visible : array_like of bool, shape (..., depth), optional
        Rows the scheduler may use; all when omitted.
    levels : list of tuple of int, optional
        Scheduler levels; :func:`~trainforge.spec.tensordash.lane_levels` when omitted.

    Returns
    -------
    Schedule
    """
    z = np.array(candidates, dtype=bool)
    depth, lanes = z.shape[-2:]
    if visible is None:
        visible = np.ones(z.shape[:-1], dtype=bool)
    visible = np.asarray(visible, dtype=bool)
    z &= visible[..., None]
    if levels is None:
        levels = lane_levels(pattern, lanes)
    batch = z.shape[:-2]
    ms = np.zeros(batch + (lanes,), dtype=np.int64)
    active = np.zeros(batch + (lanes,), dtype=bool)
    chosen = np.zeros_like(z)
    for level in levels:
        for lane in level:
            found = np.zeros(batch, dtype=bool)
            for index, (row, column) in enumerate(option_slots(pattern, lanes, lane)):
                take = z[..., row, column] & ~found
                ms[..., lane] = np.where(take, index, ms[..., lane])
                chosen[..., row, column] |= take
                z[..., row, column] &= ~take
                found |= take
            active[..., lane] = found
    drained = visible & ~z.any(axis=-1)
    advance = np.cumprod(drained, axis=-1).sum(axis=-1)
    return Schedule(ms=ms, active=active, chosen=chosen, remaining=z, advance=advance)
