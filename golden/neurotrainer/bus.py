"""Golden model of :class:`trainforge.hw.neurotrainer.bus.NTBus`: delivered words and their cycles.

The scenario is the one without backpressure: every sink is always ready; the common vault
offers its broadcast words back to back from cycle ``broadcast_start``; PE ``i`` offers its
merge words back to back from cycle 0 and holds its REQ from cycle ``request_cycle[i]`` until
the cycle in which its last word is accepted. Under these conditions the bus's rules (see
:class:`~trainforge.hw.neurotrainer.bus.NTBus`) reduce to:

- broadcast word ``j`` is accepted in cycle ``broadcast_start + j``; no merge word is accepted
  and no grant is given in those cycles;
- in a cycle ``c`` with no grant outside the broadcast, the lowest-index PE that requests
  (``request_cycle[i] <= c`` and words left) is granted from ``c + 1``; its burst (its words up
  to and including the next END-MARK) is accepted one word per free cycle from ``c + 1`` on;
  the grant is zero in the cycle after the END-MARK, and the next arbitration is in that cycle.
  A final burst without an END-MARK keeps the grant, and the other PEs are never served;
- every word leaves the bus :data:`LATENCY` cycles after its acceptance.

The bursts are walked one by one; the words of a burst and of the broadcast are computed with
numpy arrays.
"""
import numpy as np

from ...spec.neurotrainer.bus import LATENCY, PARAMS

__all__ = ["LATENCY", "nt_bus"]

def _mask_at(broadcast_mask, cycles):
    """The ``broadcast_mask`` port value in each of ``cycles`` (a constant, or a per-cycle trace)."""
    trace = np.atleast_1d(np.asarray(broadcast_mask, dtype=np.int64))
    return trace[np.minimum(cycles, len(trace) - 1)]


def _free_cycles(first, count, busy_start, busy_end):
    """``count`` consecutive cycles from ``first`` on that avoid the busy interval ``[busy_start, busy_end)``."""
    offsets = np.arange(count)
    before = max(0, busy_start - first) if first < busy_end else 0
    return np.where(offsets < before, first + offsets, max(first, busy_end) + offsets - before)


def nt_bus(broadcast_data, broadcast_end, merge_data, merge_end, *, pes=PARAMS["pes"].default,
           width=PARAMS["width"].default, broadcast_start=0,
           broadcast_mask=None, request_cycle=None, **_):
    """Words delivered to every PE and to the common vault, with their cycles, without backpressure.

    Parameters
    ----------
    broadcast_data, broadcast_end : array_like
        The common vault's broadcast words (data and END-MARK flag), in order.
    merge_data, merge_end : sequence of array_like
        For each of the ``pes`` PEs, its merge words (data and END-MARK flag), in order.
    pes, width : int
        Block parameters (see :class:`~trainforge.hw.neurotrainer.bus.NTBus`).
    broadcast_start : int
        Cycle of the first broadcast offer.
    broadcast_mask : int or array_like of int, optional
        The ``broadcast_mask`` port: a constant, or its value in cycle 0, 1, ... (the last
        value holds afterwards). Default: every PE.
    request_cycle : array_like of int, optional
        First cycle of each PE's REQ (default 0 for all).

    Returns
    -------
    dict
        ``broadcast``: per PE a dict of ``data``, ``end``, ``cycles`` (output cycles) of the
        words it receives; ``broadcast_accept_cycles``; ``merge``: ``data``, ``end``, ``source``,
        ``cycles`` of the words on ``o_merge`` in order; ``grant_cycles``: ``(pe, first cycle of
        the grant)`` of every burst.
    """
    word_mask = (1 << width) - 1
    broadcast_data = np.asarray(broadcast_data, dtype=np.int64) & word_mask
    broadcast_end = np.asarray(broadcast_end, dtype=bool)
    if broadcast_mask is None:
        broadcast_mask = (1 << pes) - 1
    request_cycle = np.zeros(pes, dtype=np.int64) if request_cycle is None else np.asarray(request_cycle)

    busy_start = int(broadcast_start)
    busy_end = busy_start + len(broadcast_data)
    broadcast_accept = busy_start + np.arange(len(broadcast_data))
    receivers = _mask_at(broadcast_mask, broadcast_accept)
    broadcast = []
    for pe in range(pes):
        mine = (receivers >> pe) & 1 == 1
        broadcast.append({"data": broadcast_data[mine].astype(np.uint64), "end": broadcast_end[mine],
                          "cycles": broadcast_accept[mine] + LATENCY})

    words = [np.asarray(merge_data[pe], dtype=np.int64) & word_mask for pe in range(pes)]
    ends = [np.asarray(merge_end[pe], dtype=bool) for pe in range(pes)]
    taken = np.zeros(pes, dtype=np.int64)
    pieces, grant_cycles = [], []
    cycle = 0
    while True:
        waiting = np.flatnonzero(taken < [len(w) for w in words])
        if waiting.size == 0:
            break
        cycle = max(cycle, int(request_cycle[waiting].min()))
        if busy_start <= cycle < busy_end:
            cycle = busy_end
        pe = int(waiting[request_cycle[waiting] <= cycle].min())
        closing = np.flatnonzero(ends[pe][taken[pe]:])
        count = int(closing[0]) + 1 if closing.size else len(words[pe]) - int(taken[pe])
        accepted = _free_cycles(cycle + 1, count, busy_start, busy_end)
        burst = slice(int(taken[pe]), int(taken[pe]) + count)
        pieces.append((words[pe][burst], ends[pe][burst], np.full(count, pe), accepted))
        grant_cycles.append((pe, cycle + 1))
        taken[pe] += count
        if not closing.size:
            break
        cycle = int(accepted[-1]) + 1
    if pieces:
        data, end, source, accepted = (np.concatenate(column) for column in zip(*pieces))
    else:
        data, end, source, accepted = (np.zeros(0, dtype=dtype) for dtype in (np.int64, bool, np.int64, np.int64))
    return {
        "broadcast": broadcast,
        "broadcast_accept_cycles": broadcast_accept,
        "merge": {"data": data.astype(np.uint64), "end": end, "source": source.astype(np.int64),
                  "cycles": accepted.astype(np.int64) + LATENCY},
        "grant_cycles": grant_cycles,
    }
