"""Cycle model of TensorDash PEs and tiles over whole operand streams: vectorised numpy.

One *core* is a tile of ``rows`` schedulers sharing one staging-buffer
window (a PE is the 1 x 1 tile). The model runs many independent cores at
once (the batch axis ``N``), one numpy step per clock cycle.

The exact rules, shared with the RTL (:mod:`trainforge.hw.tensordash.core`):

- The stream is cut into groups of ``depth`` rows (zero rows pad the last
  group). A group from ``i_group`` goes into one of three group registers;
  rows move from the group registers into the *window*,
  ``depth`` rows written in place (stream row ``t`` in window row
  ``t mod depth``). In one cycle the window loads every row that fits behind
  this cycle's advance (rows below ``head + depth``) and that is already in a
  group register; the group registers take the next group when one of
  them is free at the start of the cycle (so ``i_group.ready`` is a
  function of registers). With an
  always-valid source the window is full from cycle
  :data:`~trainforge.spec.tensordash.FILL_LATENCY` (counted from the first
  group's transfer) until the stream ends (``verif/test_tensordash_golden.py``
  checks this against the model without the chain).
- Visible rows: window row ``d`` is visible when it is present, no window row
  before it has ``read`` and neither it nor any row between the head and it
  (head excluded) has ``clear``. So a dot product never mixes with the next.
- Each row scheduler sees ``Z = effectual & not yet multiplied`` of its
  window and makes a :func:`~.scheduler.schedule`.
- Row synchronization ("Composing TensorDash Cores"): the tile advances all
  staging buffers by ``min`` over rows of ``AS_r``. A row that drained more
  keeps its emptied rows and has nothing to do on them until the slowest row
  catches up; what a row multiplied ahead stays marked as done.
- A ``read`` row that leaves the window ends the dot product: the result is
  out :func:`~trainforge.spec.tensordash.latency` cycles after that
  scheduling cycle (:func:`~trainforge.spec.tensordash.result_cycle`).

Scheduling cycles are counted from the first cycle the window holds rows.
A source with gaps (``offered``: whether ``i_group.valid`` is high in each
clock cycle, counted from the first group's transfer) leaves the window
empty or short in some cycles; a cycle whose window is empty schedules
nothing and is no row for the accumulator (``scheduled`` says which are).
An output stall stops the whole pipeline and the buffer (the RTL's one clock
enable, made of registers: a result waits for the output stream stage); with
the sink's ``ready`` per cycle (``ready``) the model steps that stage and
gives every result's cycle under any handshakes.
"""
import collections
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...errors import ParameterError
from ...spec import tensordash as spec
from ...spec.tensordash import lane_levels
from .. import stream_stage
from .scheduler import schedule

__all__ = ["CoreRun", "pad_rows", "run_cores"]

#: Largest window (depth x lanes bits) that :func:`run_cores` runs through lookup tables.
PACKED_BITS = 20

#: Cycles from the first group's transfer to the first scheduling cycle.
FILL_LATENCY = spec.FILL_LATENCY

#: Group registers in front of the window.
GROUP_REGISTERS = spec.GROUP_REGISTERS


@dataclass
class CoreRun:
    """Outcome of :func:`run_cores`.

    Attributes
    ----------
    cycles : ndarray of int64, shape (N,)
        Scheduling cycles each core needed for its whole stream.
    macs : ndarray of int64, shape (N,)
        Effectual pairs multiplied, summed over the rows of the tile.
    read_cycles : ndarray of int64, shape (N, reads), or None
        Scheduling cycle (from 0) that drained each ``read`` row; with ``record=True``.
    multiplicity : ndarray of int64, shape (N, rows, T, lanes), or None
        How often each pair was multiplied; with ``record=True``.
    result_clocks : ndarray of int64, shape (reads,), or None
        With ``record=True`` and a ``ready`` pattern: the clock cycle (from the first group's transfer)
        of each result's transfer on ``o_sum``.
    scheduled : ndarray of bool, shape (C, N), or None
        With ``record=True``: whether the window held rows in each scheduling cycle (the cycles the
        accumulator counts as rows; all of them but the ends with an always-valid source).
    heads, selects, active : ndarray, or None
        With ``record=True``, per scheduling cycle (first axis, ``max(cycles)`` long; a core that has
        finished repeats its last head with no lane active): the head row, shape (C, N); each lane's
        option index ``MS``, shape (C, N, rows, lanes); whether the lane multiplies, same shape.
    """
    cycles: np.ndarray
    macs: np.ndarray
    read_cycles: np.ndarray = None
    multiplicity: np.ndarray = None
    scheduled: np.ndarray = None
    result_clocks: np.ndarray = None
    heads: np.ndarray = None
    selects: np.ndarray = None
    active: np.ndarray = None


def pad_rows(count, depth):
    """Rows after padding ``count`` rows up to whole groups of ``depth``."""
    return -(-count // depth) * depth


def _visible(read, clear, head, depth, loaded):
    """Visible window rows, shape (N, depth), from the shared flags, each core's head row and window end."""
    index = head[:, None] + np.arange(depth)
    present = index < loaded[:, None]
    index = np.minimum(index, len(read) - 1)
    window_read = read[index] & present
    window_clear = clear[index] & present
    read_before = np.cumsum(window_read, axis=1) - window_read > 0
    clear_after_head = np.cumsum(window_clear[:, 1:], axis=1) > 0
    cut = read_before.copy()
    cut[:, 1:] |= clear_after_head
    return present & ~cut


def run_cores(effectual, read, clear, pattern, depth, record=False, offered=None, ready=None, latency=None):
    """Run ``N`` cores, each with ``rows`` schedulers, over streams of ``T`` rows.

    Parameters
    ----------
    effectual : array_like of bool, shape (N, rows, T, lanes)
        Which pairs are effectual (B non-zero in B-only mode; both non-zero otherwise).
        ``T`` is a whole number of groups (:func:`pad_rows`).
    read, clear : array_like of bool, shape (T,)
        Row flags, common to all cores.
    pattern : sequence of (int, int)
        Validated connectivity pattern.
    depth : int
        Staging buffer depth D.
    record : bool
        Also return the cycle of every ``read`` row and the multiplicity of every pair.
    offered : array_like of bool, shape (cycles,), optional
        Whether the source offers a group (``i_group.valid``) in each clock cycle, counted from the
        first group's transfer (so ``offered[0]`` is true), common to all cores; cycles past its end
        offer. Default: an always-valid source.
    ready : array_like of bool, shape (cycles,), optional
        The sink's ``o_sum.ready`` in each clock cycle, counted as ``offered`` (cycles past its end
        ready). With it the output stream stage is modelled cycle by cycle, and the whole pipeline and
        buffer stop while a result waits for the stage (the RTL's one clock enable): one core only,
        and ``latency`` (:func:`~trainforge.spec.tensordash.latency`) is needed. Default: always ready.
    latency : int, optional
        Cycles from the scheduling cycle that drains a ``read`` row to its result on ``o_sum``.

    Returns
    -------
    CoreRun
    """
    effectual = np.asarray(effectual, dtype=bool)
    count, rows, total, lanes = effectual.shape
    if total % depth:
        raise ValueError(f"stream of {total} rows is not a whole number of {depth}-row groups")
    read = np.asarray(read, dtype=bool)
    clear = np.asarray(clear, dtype=bool)
    if offered is not None:
        offered = np.asarray(offered, dtype=bool)
        if offered.ndim != 1 or (len(offered) and not offered[0]):
            raise ParameterError("offered must be one flag per clock cycle from the first group's transfer, "
                                 f"offered[0] true; got shape {offered.shape}")
    if not record and offered is None and ready is None and depth * lanes <= PACKED_BITS:
        return _run_packed(effectual, read, clear, tuple(pattern), depth)
    handshakes = ready is not None
    if handshakes and (count != 1 or latency is None):
        raise ParameterError("a sink ready pattern (ready) needs one core and the result latency")
    levels = lane_levels(pattern, lanes)
    padded = np.concatenate([effectual, np.zeros((count, rows, 2 * depth, lanes), dtype=bool)], axis=2)
    window = padded[:, :, :depth].copy()
    head = np.zeros(count, dtype=np.int64)
    cycles = np.zeros(count, dtype=np.int64)
    macs = np.zeros(count, dtype=np.int64)
    offsets = np.arange(depth)
    heads, selects, actives, scheduled = [], [], [], []
    multiplicity = np.zeros(effectual.shape, dtype=np.int64) if record else None
    # The input chain: window end (rows loaded) and group-register end (rows taken).
    loaded = np.zeros(count, dtype=np.int64)
    registered = np.zeros(count, dtype=np.int64)
    read_rows = np.flatnonzero(read)
    # ``clock`` counts the core's steps (clock cycles with the pipeline enabled), ``now`` every clock cycle.
    # Without a ``ready`` pattern the sink always takes a result and the two are the same. With one, the
    # output stream stage is stepped cycle by cycle and the pipeline stops while a result waits for it.
    clock = now = 0
    draining = collections.deque()      # core step that drained each read row whose result is in the pipeline
    stage = stream_stage.StageState()
    result_clocks = []
    while (head < total).any() or draining or stage.output_valid:
        if handshakes:
            at_end = bool(draining) and draining[0] + latency - 1 == clock
            enabled = not at_end or stage.input_ready
            accepted, delivered = stream_stage.step(stage, read_rows[0] if at_end else None,
                                                    now >= len(ready) or bool(ready[now]))
            if delivered is not None:
                result_clocks.append(now)
            if accepted:
                draining.popleft()
            now += 1
            if not enabled:
                continue
            if not (head < total).any():
                clock += 1
                continue
        else:
            now += 1
        running = (head < total) & (clock >= FILL_LATENCY)
        visible = _visible(read, clear, head, depth, loaded)
        decision = schedule(window, pattern, np.broadcast_to(visible[:, None, :], (count, rows, depth)),
                            levels=levels)
        advance = decision.advance.min(axis=1)
        cycles += running
        macs += decision.chosen.sum(axis=(1, 2, 3))
        if record and clock >= FILL_LATENCY:
            n, r, d, lane = np.nonzero(decision.chosen)
            np.add.at(multiplicity, (n, r, head[n] + d, lane), 1)
            heads.append(head.copy())
            scheduled.append(loaded > head)
            selects.append(decision.ms)
            actives.append(decision.active)
        if handshakes:
            draining.extend([clock] * int(((read_rows >= head[0]) & (read_rows < head[0] + advance[0])).sum()))
        upcoming = np.take_along_axis(padded, (head + depth)[:, None, None, None]
                                      + offsets[None, None, :, None], axis=2)
        joined = np.concatenate([window & ~decision.chosen, upcoming], axis=2)
        window = np.take_along_axis(joined, (advance[:, None] + offsets)[:, None, :, None], axis=2)
        head = head + advance
        # The source's group is taken when, before this cycle's loads, the group registers have one free.
        source_valid = offered is None or now - 1 >= len(offered) or offered[now - 1]
        take = (registered < total) & source_valid & (registered - loaded <= (GROUP_REGISTERS - 1) * depth)
        loaded = np.maximum(loaded, np.minimum(head + depth, registered))
        registered = registered + take * depth
        clock += 1
    read_cycles = None
    if record:
        # The read row t drains in the first cycle after which the head has passed it.
        after = np.stack(heads[1:] + [head], axis=1)  # head after each cycle, (N, cycles)
        read_cycles = np.stack([np.searchsorted(after[n], read_rows, side="right") for n in range(count)])
    if record:
        return CoreRun(cycles=cycles, macs=macs, read_cycles=read_cycles, multiplicity=multiplicity,
                       scheduled=np.array(scheduled), result_clocks=np.array(result_clocks) if handshakes else None,
                       heads=np.array(heads), selects=np.array(selects), active=np.array(actives))
    return CoreRun(cycles=cycles, macs=macs)


@lru_cache(maxsize=8)
def _tables(pattern, lanes, depth):
    """Lookup tables over every window bit vector (bit ``d * lanes + lane``) for :func:`_run_packed`.

    ``chosen[z]``: the slots :func:`~.scheduler.schedule` takes from the
    visible candidates ``z``; ``leading[r]``: leading rows of ``r`` with no
    bit set; ``count[z]``: bits set.
    """
    bits = depth * lanes
    vectors = np.arange(1 << bits, dtype=np.int64)
    unpacked = ((vectors[:, None] >> np.arange(bits)) & 1).astype(bool).reshape(-1, depth, lanes)
    weights = np.int64(1) << np.arange(bits, dtype=np.int64).reshape(depth, lanes)
    chosen = (schedule(unpacked, pattern, levels=lane_levels(pattern, lanes)).chosen * weights).sum(axis=(1, 2))
    leading = np.cumprod(~unpacked.any(axis=2), axis=1).sum(axis=1)
    return chosen, leading, unpacked.sum(axis=(1, 2))


def _run_packed(effectual, read, clear, pattern, depth):
    """:func:`run_cores` without recording, each window packed into one integer and scheduled by table lookup.

    The state per core row is the set of window slots already multiplied
    (``consumed``); the window itself is read from the stream at the head.
    Same rules, same results as the array path (tested against it).
    """
    count, rows, total, lanes = effectual.shape
    chosen_table, leading_table, count_table = _tables(pattern, lanes, depth)
    full = (1 << (depth * lanes)) - 1
    row_bits = (effectual.astype(np.int64) << np.arange(lanes, dtype=np.int64)).sum(axis=3)
    row_bits = np.concatenate([row_bits, np.zeros((count, rows, depth), dtype=np.int64)], axis=2)
    windows = sum(row_bits[:, :, d:d + total] << (d * lanes) for d in range(depth))  # (N, rows, T)
    row_masks = ((1 << lanes) - 1) << (np.arange(depth, dtype=np.int64) * lanes)
    head = np.zeros(count, dtype=np.int64)
    consumed = np.zeros((count, rows), dtype=np.int64)
    cycles = np.zeros(count, dtype=np.int64)
    macs = np.zeros(count, dtype=np.int64)
    cores = np.arange(count)
    while (head < total).any():
        running = head < total
        visible_bits = (_visible(read, clear, head, depth, np.full(count, total)) * row_masks).sum(axis=1)
        z = windows[cores, :, np.minimum(head, total - 1)] & ~consumed & visible_bits[:, None]
        chosen = chosen_table[z]
        advance = leading_table[(z & ~chosen) | (full & ~visible_bits)[:, None]].min(axis=1)
        cycles += running
        macs += count_table[chosen].sum(axis=1)
        consumed = (consumed | chosen) >> (advance * lanes)[:, None]
        head = head + advance
    return CoreRun(cycles=cycles, macs=macs)
