"""Golden model of :class:`trainforge.hw.neurotrainer.pmag.NTPMAG`: the PMAG address sequence, vectorised.

A PMAG program (a dict with the fields of ``NTPMAG.program_layout``) describes

- seven nested counters ``r1`` (outermost) .. ``r7`` (innermost), counter ``i``
  running ``0 .. max[i]`` ("R1 ~ R7: maximum value of r1 ~ r7 loop, minimum value
  are all zero", Table 2);
- the decoders of Fig. 4: ``s, t, u, v`` each pick a *source* among zero, ``r1..r7``
  and the program constant ``const``; then ``p = s + t`` and ``q = u + v`` (the
  convolution input coordinate = output coordinate + kernel coordinate); ``a, b, c,
  d`` each pick among zero, ``r1..r7``, ``const``, ``p`` and ``q``;
- the combinational address function
  ``address = base + a*stride[0] + b*stride[1] + c*stride[2] + d*stride[3]  (mod 2**32)``;
- the two comparators of Table 3: ``h`` and ``k`` (picked like ``a..d``) are *inside*
  when ``h_lo <= h < h_hi`` and ``k_lo <= k < k_hi``. ``window = 0``: not used (every
  step is inside); ``1``: steps outside are skipped (remove pad, partition); ``2``:
  steps outside are issued with ``pad = 1`` (add pad: the vault writes a zero there);
- a request stream of ``(address, write, pad, end)`` closed by END-MARK: one last
  request with ``end = 1`` whose address field holds 0xFFFF (``wide = 0``, 16-bit
  data) or 0xFFFFFFFF (``wide = 1``).

Source codes (4 bits): 0 zero, 1..7 ``r1..r7``, 8 ``const``, 9 ``p``, 10 ``q``; any
other code reads zero, and ``s, t, u, v`` read zero for 9 and 10 as well (no loop).

Timing (cycle-exact with the hardware): the requests leave through the shared stream
stage (a skid buffer with a registered ``ready``). A program accepted in cycle ``c`` spends
``SETUP_CYCLES`` cycles preparing its address walk and takes its first step in cycle
``c + 1 + SETUP_CYCLES``; an issued step waits for the stage's ``ready`` and is
on the output from the next cycle; a skipped step takes one cycle and issues nothing; the
END-MARK is issued in the step after the last counter value. See :func:`transfer_cycles`.
"""
import numpy as np

from ...spec.neurotrainer.pmag import LATENCY, LEVELS, PARAMS, SETUP_CYCLES, SOURCE_NAMES, WINDOW_MODES, end_mark
from ..stream_stage import StageState
from ..stream_stage import step as stage_step

__all__ = ["LEVELS", "SOURCE_NAMES", "WINDOW_MODES", "end_mark", "counter_values", "nt_pmag",
           "transfer_cycles", "default_program", "random_program"]

_MASK32 = (1 << 32) - 1


def default_program():
    """A program that issues the single address 0 (every field present, all zero)."""
    return {"max": [0] * LEVELS, "s": 0, "t": 0, "u": 0, "v": 0, "a": 0, "b": 0, "c": 0, "d": 0,
            "const": 0, "base": 0, "stride": [0] * 4, "h": 0, "k": 0, "h_lo": 0, "h_hi": 0,
            "k_lo": 0, "k_hi": 0, "window": 0, "write": 0, "wide": 1}


def counter_values(maxima):
    """All counter tuples in issue order: shape (steps, 7), int64, ``r7`` fastest (numpy broadcast)."""
    grids = np.indices([int(m) + 1 for m in maxima], dtype=np.int64)
    return grids.reshape(LEVELS, -1).T


def _sources(counters, const, p=None, q=None):
    """Source table (steps, 16): column = source code."""
    steps = counters.shape[0]
    table = np.zeros((steps, 16), dtype=np.int64)
    table[:, 1:LEVELS + 1] = counters
    table[:, 8] = const
    if p is not None:
        table[:, 9] = p
        table[:, 10] = q
    return table


def nt_pmag(program, *, counter_bits=PARAMS["counter_bits"].default, **_):
    """The request stream of one program.

    Parameters
    ----------
    program : dict
        The program fields (see the module docstring and ``NTPMAG.program_layout``).
    counter_bits : int
        Counter width; every ``max`` must fit (the hardware keeps ``counter_bits`` bits).

    Returns
    -------
    dict of numpy.ndarray
        ``address`` (uint64), ``write``, ``pad``, ``end`` (bool): the requests in order, the
        END-MARK last; ``issued`` (bool, one per counter step): whether the step issued a request.
    """
    limit = (1 << counter_bits) - 1
    maxima = [int(m) & limit for m in program["max"]]
    counters = counter_values(maxima)
    mask_wide = (1 << (counter_bits + 1)) - 1
    const = int(program["const"]) & limit
    table = _sources(counters, const)
    pick = lambda name: table[:, int(program[name]) & 15]  # p and q read zero in this table
    p = (pick("s") + pick("t")) & mask_wide
    q = (pick("u") + pick("v")) & mask_wide
    table = _sources(counters, const, p, q)
    pick = lambda name: table[:, int(program[name]) & 15]
    address = np.full(len(counters), int(program["base"]) & _MASK32, dtype=np.uint64)
    for name, stride in zip("abcd", program["stride"]):
        address += pick(name).astype(np.uint64) * np.uint64(int(stride) & _MASK32)
    address &= np.uint64(_MASK32)
    h, k = pick("h"), pick("k")
    h_lo, h_hi, k_lo, k_hi = (int(program[name]) & mask_wide for name in ("h_lo", "h_hi", "k_lo", "k_hi"))
    inside = (h >= h_lo) & (h < h_hi) & (k >= k_lo) & (k < k_hi)
    window = int(program["window"])
    if window == WINDOW_MODES["off"] or window == 3:
        inside[:] = True
    issued = inside | (window == WINDOW_MODES["pad"])
    count = int(issued.sum())
    wide = bool(program["wide"])
    return {
        "address": np.append(address[issued], np.uint64(end_mark(wide))),
        "write": np.full(count + 1, bool(program["write"])),
        "pad": np.append(~inside[issued], False),
        "end": np.append(np.zeros(count, dtype=bool), True),
        "issued": issued,
    }


def transfer_cycles(issued, accept_cycle, ready):
    """Cycles at which the requests of a sequence of programs leave the PMAG, given the consumer's ``ready``.

    Parameters
    ----------
    issued : array_like of bool, or sequence of them
        Per counter step, whether it issues a request (``nt_pmag(...)["issued"]``); one array
        per program for a sequence of programs.
    accept_cycle : int, or sequence of int
        Cycle in which each program was accepted (``i_program`` transfer).
    ready : array_like of bool
        ``ready`` of the request stream in every cycle from 0 on (long enough to cover the run).

    Returns
    -------
    numpy.ndarray of int64, or list of them
        The transfer cycle of every request of each program, its END-MARK last.

    Raises
    ------
    ValueError
        A program accepted while the previous one is still stepping, or ``ready`` too short.

    Notes
    -----
    The requests leave through the shared stream stage (a skid buffer,
    :mod:`trainforge.golden.stream_stage`, stepped here cycle by cycle): a program accepted
    in cycle ``c`` prepares its walk for ``SETUP_CYCLES`` cycles (busy, no step) and steps
    first in ``c + 1 + SETUP_CYCLES``; an issued step (a request or the END-MARK)
    happens in a cycle in which the stage's registered ``ready`` is high (its skid register
    is empty), a skipped step in any cycle. The stage holds up to two requests, so under
    backpressure the counters run up to one request further ahead than with a one-entry
    output register; without backpressure request ``i`` leaves in
    ``c + LATENCY + step index``. The next program can be accepted from the cycle after
    the END-MARK entered the stage.
    """
    single = np.ndim(accept_cycle) == 0
    programs = [issued] if single else list(issued)
    accepts = [int(accept_cycle)] if single else [int(cycle) for cycle in accept_cycle]
    steps = [[*np.asarray(flags, dtype=bool).tolist(), True] for flags in programs]  # the END-MARK is the last step
    ready = np.asarray(ready, dtype=bool)
    stage = StageState()
    transfers = [[] for _ in programs]
    current, step_index, next_program, setup_left = None, 0, 0, 0
    delivered_count, wanted = 0, sum(int(np.count_nonzero(flags)) for flags in steps)
    for cycle in range(len(ready)):
        busy = current is not None
        setting_up = busy and setup_left > 0
        offered = (current, step_index) if busy and not setting_up and steps[current][step_index] else None
        accepted, out = stage_step(stage, offered, bool(ready[cycle]))
        if out is not None:
            transfers[out[0]].append(cycle)
            delivered_count += 1
        if setting_up:
            setup_left -= 1
        elif busy and (accepted or offered is None):
            step_index += 1
            if step_index == len(steps[current]):
                current = None
        if next_program < len(accepts) and accepts[next_program] == cycle:
            if busy:
                raise ValueError(f"program {next_program} accepted in cycle {cycle} while program {current} "
                                 "is still stepping")
            current, step_index, next_program, setup_left = next_program, 0, next_program + 1, SETUP_CYCLES
        elif next_program < len(accepts) and accepts[next_program] < cycle:
            raise ValueError(f"program {next_program} accepted in cycle {accepts[next_program]}, before the "
                             "previous one ended")
        if delivered_count == wanted and next_program == len(accepts) and current is None:
            break
    if delivered_count < wanted:
        raise ValueError(f"the ready trace ({len(ready)} cycles) ends before every request has left")
    result = [np.array(cycles, dtype=np.int64) for cycles in transfers]
    return result[0] if single else result


def random_program(rng, counter_bits=PARAMS["counter_bits"].default, max_steps=200):
    """A random program of at most about ``max_steps`` counter steps (for tests).

    Every source code (including the unused ones), window mode, data width and direction
    is drawn; strides and the base span the full 32 bits so the address wraps.

    Parameters
    ----------
    rng : numpy.random.Generator
    counter_bits : int
    max_steps : int
    """
    limit = (1 << counter_bits) - 1
    maxima = [0] * LEVELS
    steps = 1
    for level in rng.permutation(LEVELS):
        room = max_steps // steps
        if room >= 2:
            maxima[level] = int(min(rng.integers(0, min(room, 6)), limit))
            steps *= maxima[level] + 1
    wide_limit = (1 << (counter_bits + 1)) - 1
    program = default_program()
    program.update({
        "max": maxima,
        **{name: int(rng.integers(0, 9)) for name in "stuv"},
        **{name: int(rng.integers(0, 16) if rng.random() < 0.1 else rng.integers(0, 11)) for name in "abcdhk"},
        "const": int(rng.integers(0, limit + 1)),
        "base": int(rng.integers(0, 1 << 32)),
        "stride": [int(rng.integers(0, 1 << 32) if rng.random() < 0.3 else rng.integers(0, 64)) for _ in range(4)],
        "window": int(rng.integers(0, 4)),
        "write": int(rng.integers(0, 2)),
        "wide": int(rng.integers(0, 2)),
    })
    for low, high in (("h_lo", "h_hi"), ("k_lo", "k_hi")):
        bounds = sorted(int(v) for v in rng.integers(0, min(wide_limit, 8) + 1, size=2))
        program[low], program[high] = bounds
    return program
