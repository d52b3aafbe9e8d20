"""Golden model of the CATERPILLAR linear algebra core (``cp_core``): data mapping, results and cycles.

Vectorised numpy, bit-exact with the fixed-point RTL and cycle-exact without
backpressure. The conventions, shared with :class:`trainforge.hw.caterpillar.core.CPCore`:

- A matrix ``W`` of ``m x n`` is zero-padded to ``Mb * n_r`` by ``Nb * n_r``
  (``Mb = ceil(m / n_r)``, ``Nb = ceil(n / n_r)``) and distributed 2D round
  robin: ``W[i, j]`` lives in PE ``(i % n_r, j % n_r)`` at local address
  ``base + (j // n_r) * Mb + i // n_r``.
- GEMV forward ``y = x^T W``: ``x`` on the row buses, one output block of
  ``n_r`` elements per ``Mb`` MAC cycles, then the column reduction into the
  diagonal PEs and the output cycle.
- GEMV backward ``d = W e`` (the transpose, weights left in place): ``e`` on
  the column buses, ``Nb`` MAC cycles per output block, then the row reduction.
- GEMM ``C = W B`` by rank-1 updates: at step ``p`` the column ``W[:, p]`` is
  broadcast on the row buses by the PEs of PE column ``p % n_r`` and the row
  ``B[p, :]`` on the column buses; every PE accumulates one element of an
  ``n_r x n_r`` block of ``C``, read out row by row in ``n_r`` cycles.
- UPDATE ``W -= shift_round(sum_s x_s e_s^T)`` in place (rank-``b``, :func:`update`): ``x_s`` on
  the row buses, ``e_s`` on the column buses, ``b`` MACs per weight word, then
  one read-modify-write of the word in its PE's local memory.
- All sums wrap modulo ``2 ** acc_width`` (two's complement); the updated
  weight saturates to ``width`` bits.

With ``mac="fp16"`` (the paper's half-precision FPU) the same entry points compute in FP16/FP32 in the
hardware's order (:mod:`trainforge.golden.caterpillar.core_fp16`): FP16 operands, FP32 sums and results; the
schedules and event counts are the same.
"""
import numpy as np

from ...errors import ProgramError
from ...spec.caterpillar import (COMMAND_LATENCY, CORE_PARAMS, ERROR_OFFSET, EXECUTE_LATENCY, OUTPUT_LATENCY,
                                 REJECT_CYCLES, CommandField, CoreEvent, CoreOp,
                                 core_accumulate_latency, core_command_violation, core_reduction_latency,
                                 core_update_drain, gemv_block_gap, gemv_final_gap, max_shift, params_with_defaults,
                                 reduction_cycles, shift_bits)
from ..dense_pe import wrap
from . import core_fp16

__all__ = [
    "CoreOp", "OP_GEMV_FORWARD", "OP_GEMV_BACKWARD", "OP_GEMM", "OP_LOAD", "OP_UPDATE",
    "COMMAND_LATENCY", "OUTPUT_LATENCY", "blocks", "pad", "distribute", "load_words", "reduction_cycles",
    "gemv_forward", "gemv_backward", "gemm", "shift_bits", "update_delta", "update", "check_update",
    "CommandField", "command", "check_command", "command_error", "Schedule", "schedule", "command_schedule",
    "CoreEvent", "counts", "program_counts",
    "gemv_utilization",
]

#: Short names of the :class:`~trainforge.spec.caterpillar.CoreOp` members, for the system models.
OP_GEMV_FORWARD, OP_GEMV_BACKWARD, OP_GEMM, OP_LOAD, OP_UPDATE = (
    CoreOp.GEMV_FORWARD, CoreOp.GEMV_BACKWARD, CoreOp.GEMM, CoreOp.LOAD, CoreOp.UPDATE)


def blocks(size, n_r):
    """Number of ``n_r``-element blocks covering ``size`` elements (at least one)."""
    return max(1, -(-int(size) // n_r))


def pad(matrix, rows, cols):
    """``matrix`` zero-padded to ``rows x cols`` (int64)."""
    matrix = np.asarray(matrix, dtype=np.int64)
    padded = np.zeros((rows, cols), dtype=np.int64)
    padded[:matrix.shape[0], :matrix.shape[1]] = matrix
    return padded


def distribute(weights, n_r):
    """Local memory images of the 2D round-robin distribution.

    Parameters
    ----------
    weights : array_like, shape (m, n)
    n_r : int

    Returns
    -------
    numpy.ndarray, shape (n_r, n_r, Nb * Mb)
        ``image[r, c, a]`` is the word at address ``a`` (relative to the base) of PE ``(r, c)``.
    """
    weights = np.asarray(weights)
    mb, nb = blocks(weights.shape[0], n_r), blocks(weights.shape[1], n_r)
    padded = pad(weights, mb * n_r, nb * n_r)
    # padded[ib * n_r + r, jb * n_r + c] -> image[r, c, jb * Mb + ib]
    tiles = padded.reshape(mb, n_r, nb, n_r).transpose(1, 3, 2, 0)
    return tiles.reshape(n_r, n_r, nb * mb)


def load_words(weights, n_r):
    """The ``i_data`` words of a LOAD command: one row of PEs per word, address-major.

    Returns
    -------
    numpy.ndarray, shape (Nb * Mb * n_r, n_r)
        Word ``a * n_r + r`` writes lane ``c`` into PE ``(r, c)`` at address ``base + a``.
    """
    image = distribute(weights, n_r)
    return image.transpose(2, 0, 1).reshape(-1, n_r)


def _core_params(given, *names):
    """The values of ``names``: ``given`` (any block's parameter dict), else the ``cp_core`` schema defaults."""
    values = params_with_defaults(CORE_PARAMS, given)
    return tuple(values[name] for name in names)


def _vector_blocks(vector, count, n_r):
    vector = np.asarray(vector, dtype=np.int64).reshape(-1)
    padded = np.zeros(count * n_r, dtype=np.int64)
    padded[:vector.size] = vector
    return padded.reshape(count, n_r)


def gemv_forward(weights, x, **params):
    """GEMV forward ``y = x^T W``.

    Returns
    -------
    inputs : numpy.ndarray, shape (Mb, n_r)
        The ``i_data`` words (the padded ``x``, one block per word).
    outputs : numpy.ndarray, shape (Nb, n_r)
        The ``o_data`` words: block ``jb`` holds ``y[jb * n_r : (jb + 1) * n_r]``
        (padding lanes are zero).
    """
    n_r, acc_width, mac, reduction, partial_sums, reduction_partials = _core_params(
        params, "n_r", "acc_width", "mac", "reduction", "partial_sums", "reduction_partials")
    if mac == "fp16":
        return core_fp16.gemv_forward(weights, x, n_r, reduction, partial_sums, reduction_partials)
    weights = np.asarray(weights, dtype=np.int64)
    mb, nb = blocks(weights.shape[0], n_r), blocks(weights.shape[1], n_r)
    inputs = _vector_blocks(x, mb, n_r)
    padded = pad(weights, mb * n_r, nb * n_r).astype(np.uint64)
    y = inputs.reshape(-1).astype(np.uint64) @ padded
    return inputs, wrap(y, acc_width, True).reshape(nb, n_r)


def gemv_backward(weights, e, **params):
    """GEMV backward ``d = W e`` with the weights of the forward pass left in place.

    Returns
    -------
    inputs : numpy.ndarray, shape (Nb, n_r)
    outputs : numpy.ndarray, shape (Mb, n_r)
    """
    n_r, acc_width, mac, reduction, partial_sums, reduction_partials = _core_params(
        params, "n_r", "acc_width", "mac", "reduction", "partial_sums", "reduction_partials")
    if mac == "fp16":
        return core_fp16.gemv_backward(weights, e, n_r, reduction, partial_sums, reduction_partials)
    weights = np.asarray(weights, dtype=np.int64)
    mb, nb = blocks(weights.shape[0], n_r), blocks(weights.shape[1], n_r)
    inputs = _vector_blocks(e, nb, n_r)
    padded = pad(weights, mb * n_r, nb * n_r).astype(np.uint64)
    d = padded @ inputs.reshape(-1).astype(np.uint64)
    return inputs, wrap(d, acc_width, True).reshape(mb, n_r)


def gemm(weights, b, **params):
    """GEMM ``C = W B`` by rank-1 updates.

    Parameters
    ----------
    weights : array_like, shape (m, k)
        Resident in the local memories (distributed as by :func:`distribute`).
    b : array_like, shape (k, q)
        Streamed on ``i_data``.

    Returns
    -------
    inputs : numpy.ndarray, shape (Qb * Mb * Kb * n_r, n_r)
        The ``i_data`` words: for each output block ``(qb, ib)`` (``qb`` outer)
        the ``Kb * n_r`` rows ``B[p, qb * n_r : (qb + 1) * n_r]``.
    outputs : numpy.ndarray, shape (Qb * Mb * n_r, n_r)
        The ``o_data`` words: for each output block, its ``n_r`` rows.
    """
    n_r, acc_width, mac, partial_sums = _core_params(params, "n_r", "acc_width", "mac", "partial_sums")
    if mac == "fp16":
        return core_fp16.gemm(weights, b, n_r, partial_sums)
    weights = np.asarray(weights, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if weights.shape[1] != b.shape[0]:
        raise ProgramError(f"inner dimensions differ: W is {weights.shape}, B is {b.shape}")
    mb, kb, qb = blocks(weights.shape[0], n_r), blocks(weights.shape[1], n_r), blocks(b.shape[1], n_r)
    padded_w = pad(weights, mb * n_r, kb * n_r)
    padded_b = pad(b, kb * n_r, qb * n_r)
    c = wrap(padded_w.astype(np.uint64) @ padded_b.astype(np.uint64), acc_width, True)
    # inputs[qb, ib, p, lane] = B[p, qb * n_r + lane], repeated for every ib.
    b_panels = padded_b.reshape(kb * n_r, qb, n_r).transpose(1, 0, 2)
    inputs = np.broadcast_to(b_panels[:, None], (qb, mb, kb * n_r, n_r)).reshape(-1, n_r)
    # outputs[qb, ib, r, lane] = C[ib * n_r + r, qb * n_r + lane]
    outputs = c.reshape(mb, n_r, qb, n_r).transpose(2, 0, 1, 3).reshape(-1, n_r)
    return inputs, outputs


def _describe(params):
    return ", ".join(f"{name}={params[name]}" for name in ("max_blocks", "sram_depth", "acc_width"))


def check_command(command, **params):
    """Raise :class:`~trainforge.errors.ProgramError` unless the core executes ``command`` (a dict of its fields).

    The message names the first field out of its range
    (:func:`~trainforge.spec.caterpillar.core_command_limits`, in the core's order), its value and the
    allowed range: the command the core would reject (:func:`command_error`). ``params``: the core's
    (default: the ``cp_core`` schema's).
    """
    values = params_with_defaults(CORE_PARAMS, params)
    violation = core_command_violation(values, command)
    if violation is not None:
        _, name, value, low, high = violation
        op = int(command["op"])
        kind = CoreOp(op).name if op in set(CoreOp) else f"op {op}"
        raise ProgramError(f"{kind} command field {name!r} = {value} is out of range; allowed: {low}..{high} "
                           f"({_describe(values)})")


def command(op, mb=1, nb=1, qb=1, base=0, overlap=False, shift=0, **params):
    """A ``cp_core`` command word (a dict of its fields), checked.

    Raises :class:`~trainforge.errors.ProgramError` naming the field, its value and the allowed range when a
    field is out of its range (:func:`check_command`: the core would reject the command) or when the command's
    words ``base .. base + mb * nb - 1`` run past the local memory (the core does not check this extent: its
    addresses would wrap).
    """
    word = {"op": int(op), "overlap": int(overlap), "mb": int(mb), "nb": int(nb), "qb": int(qb), "base": int(base),
            "shift": int(shift)}
    check_command(word, **params)
    values = params_with_defaults(CORE_PARAMS, params)
    extent = word["base"] + word["mb"] * word["nb"]
    if extent > values["sram_depth"]:
        raise ProgramError(f"{CoreOp(word['op']).name} command field 'base' = {word['base']} is out of range for "
                           f"mb * nb = {word['mb'] * word['nb']} words; allowed: "
                           f"0..{values['sram_depth'] - word['mb'] * word['nb']} ({_describe(values)})")
    return word


def command_error(command, **params):
    """The core's response to ``command``: ``None`` if it executes it, else its ``o_error`` word.

    A rejected command is not executed: it takes no ``i_data`` word, writes no local memory or buffer and
    produces no ``o_data`` word; the core sends ``{"field": code, "op": op}`` on ``o_error``
    (``code``: the :class:`~trainforge.spec.caterpillar.CommandField` of the first field out of range, in the
    order of :func:`~trainforge.spec.caterpillar.core_command_checks`; ``op``: the command's op field) at
    :data:`~trainforge.spec.caterpillar.ERROR_OFFSET` cycles after acceptance (:func:`command_schedule`).
    """
    violation = core_command_violation(params_with_defaults(CORE_PARAMS, params), command)
    if violation is None or violation[0] is None:
        return None
    return {"field": int(violation[0]), "op": int(command["op"]) & 7}


def check_update(mb, nb, batch, shift, **params):
    """Raise :class:`~trainforge.errors.ProgramError` unless an UPDATE command with these fields fits the core.

    The core keeps the ``batch`` input vectors (``batch * Mb`` words) and error
    vectors (``batch * Nb`` words) in its two vector buffers of ``max_blocks``
    words each; ``shift`` fits the command's field
    (:func:`~trainforge.spec.caterpillar.max_shift`). The UPDATE case of :func:`check_command`
    (``qb`` is the batch).
    """
    check_command({"op": int(CoreOp.UPDATE), "overlap": 0, "mb": mb, "nb": nb, "qb": batch, "base": 0,
                   "shift": shift}, **params)


def update_delta(products, shift):
    """The weight decrement of UPDATE: ``products / 2**shift`` rounded to nearest, ties toward +infinity.

    ``floor(P / 2**shift + 1/2)``, computed exactly on integers as
    ``(P >> shift) + bit(shift - 1) of P`` (``P`` itself for ``shift == 0``);
    the RTL computes the same as ``((2 P >> shift) + 1) >> 1``.

    Parameters
    ----------
    products : numpy.ndarray of int64
        The wrapped sums ``P`` (signed ``acc_width``-bit values).
    shift : int
        0 .. 63.
    """
    products = np.asarray(products, dtype=np.int64)
    if shift == 0:
        return products.copy()
    return (products >> shift) + ((products >> (shift - 1)) & 1)


def update(weights, x, e, shift, **params):
    """The in-place weight update ``W[i, j] -= round(sum_s x_s[i] e_s[j] / 2**shift)`` (rank ``b``).

    Exact rule, per weight word of the ``width``-bit two's complement image:

    1. ``P = sum_s x_s[i] * e_s[j]`` over the ``b`` samples, wrapped modulo
       ``2 ** acc_width`` (the PE's MAC, the same arithmetic as GEMV and GEMM);
    2. ``delta = floor(P / 2**shift + 1/2)`` (:func:`update_delta`; no overflow);
    3. ``W' = W - delta`` saturated to ``[-2**(width-1), 2**(width-1) - 1]``.

    The learning rate is folded into ``e`` by the host (``e = eta * error`` in
    fixed point) and ``shift`` brings the product back to the weights' scale:
    with weights, inputs and errors of ``f`` fractional bits, ``shift = f``.
    Padding words (outside ``m x n``) stay zero.

    Parameters
    ----------
    weights : array_like, shape (m, n)
        The resident weights (distributed as by :func:`distribute`).
    x : array_like, shape (b, m) or (m,)
        Input vectors, ``width``-bit operands.
    e : array_like, shape (b, n) or (n,)
        Scaled error vectors, ``width``-bit operands.
    shift : int

    Returns
    -------
    inputs : numpy.ndarray, shape (b * Mb + b * Nb, n_r)
        The ``i_data`` words: word ``ib * b + s`` is ``x_s[ib * n_r : (ib + 1) * n_r]``,
        then word ``b * Mb + jb * b + s`` is ``e_s[jb * n_r : (jb + 1) * n_r]`` (zero-padded).
    updated : numpy.ndarray, shape (m, n)
        The weights after the update.
    """
    n_r, width, acc_width, mac, partial_sums = _core_params(params, "n_r", "width", "acc_width", "mac",
                                                             "partial_sums")
    if mac == "fp16":
        return core_fp16.update(weights, x, e, shift, n_r, partial_sums)
    weights = np.asarray(weights, dtype=np.int64)
    m, n = weights.shape
    x = np.atleast_2d(np.asarray(x, dtype=np.int64))
    e = np.atleast_2d(np.asarray(e, dtype=np.int64))
    if x.shape[0] != e.shape[0] or x.shape[1] > m or e.shape[1] > n:
        raise ProgramError(f"x {x.shape} and e {e.shape} do not match W {weights.shape} (b x m and b x n)")
    batch = x.shape[0]
    mb, nb = blocks(m, n_r), blocks(n, n_r)
    x_blocks = np.stack([_vector_blocks(row, mb, n_r) for row in x])  # (b, Mb, n_r)
    e_blocks = np.stack([_vector_blocks(row, nb, n_r) for row in e])  # (b, Nb, n_r)
    inputs = np.concatenate([x_blocks.transpose(1, 0, 2).reshape(-1, n_r),
                             e_blocks.transpose(1, 0, 2).reshape(-1, n_r)])
    x_padded = x_blocks.reshape(batch, -1)[:, :m].astype(np.uint64)
    e_padded = e_blocks.reshape(batch, -1)[:, :n].astype(np.uint64)
    products = wrap(x_padded.T @ e_padded, acc_width, True)
    delta = np.clip(update_delta(products, int(shift)), -(1 << (width + 1)), 1 << (width + 1))
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return inputs, np.clip(weights - delta, low, high)


class Schedule:
    """Cycle schedule of one command on an unstalled core.

    Attributes
    ----------
    issue_cycles : int
        Cycles the sequencer spends issuing the command (from its first issue
        to the cycle after its last, including the drain of the reduction).
    output_offsets : numpy.ndarray of int
        For each ``o_data`` word, cycles from the command's acceptance on
        ``i_cmd`` to the word's transfer.
    mac_cycles : int
        Cycles in which every PE performs a MAC.
    error_offsets : numpy.ndarray of int
        For a rejected command (:func:`command_schedule`), the cycle of its ``o_error`` word after acceptance;
        empty otherwise.
    """

    def __init__(self, issue_cycles, output_offsets, mac_cycles, error_offsets=()):
        self.issue_cycles = int(issue_cycles)
        self.output_offsets = np.asarray(output_offsets, dtype=np.int64)
        self.mac_cycles = int(mac_cycles)
        self.error_offsets = np.asarray(error_offsets, dtype=np.int64)

    @property
    def utilization(self):
        """MAC cycles over issue cycles."""
        return self.mac_cycles / self.issue_cycles


def schedule(op, mb, nb, qb=1, *, overlap=False, **params):
    """Cycle schedule of one command, as the sequencer runs it.

    Each output block takes ``steps`` MAC issue cycles and then ``gap`` idle
    issue cycles, so that consecutive blocks start ``period = steps + gap``
    cycles apart; the last block always drains (its gap lets the reduction and
    the read-out finish before the next command).

    - GEMV forward: ``Nb`` blocks of ``steps = Mb``; backward: ``Mb`` blocks of
      ``steps = Nb``. Without overlap ``gap = R + 1`` (the reduction, then the
      broadcast of the result); with overlap (CP) the reduction of a block
      runs on the other buses during the MACs of the next, ``gap = max(0, R + 1 - steps)``.
      With the interleaved reduction (``reduction_partials`` above 1, ``Lr`` =
      :func:`~trainforge.spec.caterpillar.core_reduction_latency`) each output
      comes ``Lr`` cycles later, the last block drains ``R + 1 + Lr`` cycles,
      and a block period that would land a handoff in the cycle a sum is
      written is lengthened (:func:`~trainforge.spec.caterpillar.gemv_block_gap`).
    - GEMM: ``Qb * Mb`` blocks of ``steps = Kb * n_r`` rank-1 updates and
      ``gap = n_r`` read-out cycles.
    - LOAD: ``Mb * Nb * n_r`` word writes, no output.
    - UPDATE (``qb`` = the batch ``b``): ``b * Mb`` cycles take the input
      vectors into the vector buffer, then ``Mb`` row blocks of ``b * Nb``
      MAC cycles (the errors arrive on ``i_data`` during the first row block);
      each weight word is written back
      :func:`~trainforge.spec.caterpillar.update_write_back_stages` cycles (3 ``fixed``, 11 ``fp16``) after
      the accumulate stage of its last MAC. ``b * Mb * (Nb + 1)`` issue cycles, no output, then a drain of
      :func:`~trainforge.spec.caterpillar.core_update_drain` idle cycles (the read-after-write stall: the
      next command's first read follows the last write-back; 6 ``fixed``, 14 ``fp16``), plus
      :func:`~trainforge.spec.caterpillar.core_accumulate_latency` with ``partial_sums`` above 1.

    Every micro-operation reaches the PEs' accumulate stage ``EXECUTE_LATENCY`` cycles after its
    issue (the read stage, the SRAM read with its output register, the multiplier's input and output
    registers);
    the reduction, the read-out and the outputs follow that stage, so the issue schedule of GEMV,
    GEMM and LOAD does not depend on the pipeline depth, only their output offsets do. With
    ``partial_sums`` above 1 every event after the accumulate stage (the handoffs, so the reduction
    and the outputs; the GEMM read-out; the UPDATE write-back) comes
    :func:`~trainforge.spec.caterpillar.core_accumulate_latency` cycles later.

    Parameters
    ----------
    op : int
        ``OP_GEMV_FORWARD``, ``OP_GEMV_BACKWARD``, ``OP_GEMM``, ``OP_LOAD`` or ``OP_UPDATE``.
    mb, nb, qb : int
        Block counts; for GEMM ``mb``, ``nb`` are ``Mb``, ``Kb`` of ``W`` and ``qb`` those of ``B``'s columns;
        for UPDATE ``qb`` is the batch ``b``.
    n_r : int
    reduction : str
        ``"bus"`` or ``"tree"`` (:func:`reduction_cycles`).
    overlap : bool
        Overlap each GEMV reduction with the next block's MACs.

    Returns
    -------
    Schedule
    """
    values = params_with_defaults(CORE_PARAMS, params)
    n_r, reduction = values["n_r"], values["reduction"]
    if op == OP_LOAD:
        return Schedule(mb * nb * n_r, [], 0)
    if op == OP_UPDATE:
        return Schedule(qb * mb * (nb + 1) + core_update_drain(values), [], qb * mb * nb)
    r = reduction_cycles(n_r, reduction)
    if op == OP_GEMM:
        count, steps, drain, outputs = qb * mb, nb * n_r, n_r, n_r
        first_output = 0
        gap = drain
    elif op in (OP_GEMV_FORWARD, OP_GEMV_BACKWARD):
        count, steps = (nb, mb) if op == OP_GEMV_FORWARD else (mb, nb)
        drain, outputs = gemv_final_gap(values), 1
        first_output = r + core_reduction_latency(values)
        gap = gemv_block_gap(steps, overlap, values)
    else:
        raise ProgramError(f"unknown op {op!r}; allowed: {', '.join(member.name for member in CoreOp)}")
    period = steps + gap
    # The last MAC of block b is issued COMMAND_LATENCY + b * period + steps - 1 cycles after acceptance,
    # reaches the accumulate stage EXECUTE_LATENCY later and is handed off core_accumulate_latency after that;
    # its outputs follow the reduction (and its latency), one per cycle, OUTPUT_LATENCY + 1 later.
    handoff = (COMMAND_LATENCY + np.arange(count) * period + steps - 1 + EXECUTE_LATENCY
               + core_accumulate_latency(values))
    offsets = (handoff[:, None] + first_output + 1 + OUTPUT_LATENCY + np.arange(outputs)[None, :]).reshape(-1)
    issue = (count - 1) * period + steps + drain
    return Schedule(issue, offsets, count * steps)


def command_schedule(command, **params):
    """Cycle schedule of one command word (a dict of its fields) on an unstalled core, rejected or not.

    A rejected command (:func:`command_error`) holds the core
    :data:`~trainforge.spec.caterpillar.REJECT_CYCLES` cycle after its acceptance (the next command is
    accepted ``COMMAND_LATENCY + REJECT_CYCLES`` = 2 cycles after it) and its error word is on ``o_error``
    :data:`~trainforge.spec.caterpillar.ERROR_OFFSET` = 2 cycles after its acceptance. Otherwise
    :func:`schedule` of its fields.
    """
    if command_error(command, **params) is not None:
        return Schedule(REJECT_CYCLES, [], 0, error_offsets=[ERROR_OFFSET])
    return schedule(command["op"], command["mb"], command["nb"], command["qb"], overlap=bool(command["overlap"]),
                    **params)


def counts(op, mb, nb, qb=1, **params):
    """Events of one command (:class:`~trainforge.spec.caterpillar.CoreEvent`), as the core runs it.

    Counted per unit and cycle, whatever the stalls (an idle issue cycle reads
    nothing). With ``P = n_r ** 2`` PEs and ``S`` the micro-operations of the
    command:

    - GEMV forward (``S = Mb Nb``): ``P S`` MACs and local reads (every PE
      reads its weight word once per MAC); per output block ``n_r (n_r - 1)``
      reduction adds (each of the ``n_r`` lines sums ``n_r`` partial sums, on
      the bus or over the tree alike); ``x`` written into the vector buffer in
      the first output block (``Mb`` words) and read back in each other one
      (``(Nb - 1) Mb`` words); ``Mb`` words in, ``Nb`` out. Backward: the same
      with ``Mb`` and ``Nb`` swapped.
    - GEMM (``mb``, ``nb`` = ``Kb``, ``qb``; ``S = Qb Mb Kb n_r``): ``P S``
      MACs; only the ``n_r`` PEs of the broadcasting PE column read, ``n_r S``
      local reads: ``W`` is read once per output block column ``qb``, ``Qb``
      times in all; ``S`` words of ``B`` in, ``n_r Qb Mb`` words of ``C`` out.
    - LOAD: ``n_r Mb Nb`` words in, each written into one row of ``n_r`` PEs.
    - UPDATE (``qb`` = the batch ``b``): ``b Mb`` words of ``x`` in (into the
      vector buffer), ``b Nb`` words of ``e`` in during the first row block
      (into the error buffer), ``P b Mb Nb`` MACs, each taking ``x_s`` from the
      vector buffer (``b Mb Nb`` words) and, after the first row block, ``e_s``
      from the error buffer (``(Mb - 1) b Nb`` words); each weight word is read
      once (with the batch's last MAC) and written back once: ``P Mb Nb``
      local reads, writes and write-back subtractions (ADD).

    A buffer or stream word is ``n_r`` operands: BUFFER and OFFCORE counts are in operands.

    Parameters
    ----------
    op : CoreOp
    mb, nb, qb : int
        The command's block counts (as for :func:`schedule`).
    n_r : int
        PEs per row and column (default: the ``cp_core`` schema's).

    Returns
    -------
    dict
        ``{CoreEvent: int}`` with every event kind.
    """
    n_r, = _core_params(params, "n_r")
    pes = n_r * n_r
    events = dict.fromkeys(CoreEvent, 0)
    if op in (OP_GEMV_FORWARD, OP_GEMV_BACKWARD):
        inputs, outputs = (mb, nb) if op == OP_GEMV_FORWARD else (nb, mb)
        events.update({CoreEvent.MAC: pes * mb * nb, CoreEvent.LOCAL_READ: pes * mb * nb,
                       CoreEvent.ADD: outputs * n_r * (n_r - 1),
                       CoreEvent.BUFFER_WRITE: n_r * inputs, CoreEvent.BUFFER_READ: n_r * inputs * (outputs - 1),
                       CoreEvent.OFFCORE_READ: n_r * inputs, CoreEvent.OFFCORE_WRITE: n_r * outputs})
    elif op == OP_GEMM:
        steps = qb * mb * nb * n_r
        events.update({CoreEvent.MAC: pes * steps, CoreEvent.LOCAL_READ: n_r * steps,
                       CoreEvent.OFFCORE_READ: n_r * steps, CoreEvent.OFFCORE_WRITE: n_r * n_r * qb * mb})
    elif op == OP_LOAD:
        events.update({CoreEvent.LOCAL_WRITE: pes * mb * nb, CoreEvent.OFFCORE_READ: pes * mb * nb})
    elif op == OP_UPDATE:
        words = mb * nb
        events.update({CoreEvent.MAC: pes * qb * words, CoreEvent.LOCAL_READ: pes * words,
                       CoreEvent.LOCAL_WRITE: pes * words, CoreEvent.ADD: pes * words,
                       CoreEvent.BUFFER_WRITE: n_r * qb * (mb + nb),
                       CoreEvent.BUFFER_READ: n_r * qb * words + n_r * (mb - 1) * qb * nb,
                       CoreEvent.OFFCORE_READ: n_r * qb * (mb + nb)})
    else:
        raise ProgramError(f"unknown op {op!r}; allowed: {', '.join(member.name for member in CoreOp)}")
    return events


def program_counts(commands, **params):
    """Events of a program: the sum of :func:`counts` over ``commands`` (dicts with ``op``, ``mb``, ``nb`` and
    the other fields of a command word, those missing taken as ``qb`` 1, ``base``, ``overlap``, ``shift`` 0).
    A command the core rejects (:func:`command_error`) is not executed and costs no event.

    Returns
    -------
    dict
        ``{CoreEvent: int}``.
    """
    total = dict.fromkeys(CoreEvent, 0)
    for command in commands:
        if command_error({"qb": 1, "base": 0, "overlap": 0, "shift": 0, **command}, **params) is not None:
            continue
        for event, count in counts(command["op"], command["mb"], command["nb"], command.get("qb", 1),
                                   **params).items():
            total[event] += count
    return total


def gemv_utilization(m, n, n_r, reduction="bus", overlap=False, passes=("forward",)):
    """MAC utilization of GEMV on one core, from :func:`schedule`.

    Parameters
    ----------
    m, n : int
        Matrix shape.
    passes : tuple of str
        ``"forward"`` and/or ``"backward"``.
    """
    mb, nb = blocks(m, n_r), blocks(n, n_r)
    useful = cycles = 0
    for direction in passes:
        op = OP_GEMV_FORWARD if direction == "forward" else OP_GEMV_BACKWARD
        result = schedule(op, mb, nb, n_r=n_r, reduction=reduction, overlap=overlap)
        useful += m * n / n_r ** 2
        cycles += result.issue_cycles + COMMAND_LATENCY
    return useful / cycles
