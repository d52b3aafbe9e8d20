"""Golden model of :class:`trainforge.hw.caterpillar.pe.CPPE`: numpy, bit-exact, per cycle.

Both MAC units (the ``mac`` parameter) share the pipeline; they differ in
the arithmetic of the multiply stage and of the two adders:

``fixed``
    Exact two's complement products, sums wrapping to ``acc_width`` bits
    (vectorised: segmented running sums modulo ``2**64``).
``fp16``
    The operands are FP16 bit patterns (a local SRAM word, the low 16 bits of
    a bus), their product the exact FP32 product of
    :func:`trainforge.golden.fp.fp_mul_exact`; the accumulator, the
    reduction register and ``red_in`` are FP32 bit patterns. Each addition is
    one :func:`trainforge.golden.fp.fp32_add` (one rounding to nearest even,
    subnormals flushed), in the hardware's order: the accumulate stage adds
    the product to the accumulator (to ``+0`` with ``mac_clear``); the
    reduction register adds ``red_in`` to itself. ``acc`` and ``red`` are
    returned as the signed 32-bit integers of those bit patterns (the ports'
    view). The additions are sequential, so this path loops over the cycles.

    ``partial_sums`` (``fp16`` only) chooses the accumulator. 1: the
    one-cycle accumulate stage above (``acc = round32(acc + p)`` in the
    product's own cycle). ``P`` of 2, 4 or 8: the interleaved accumulator
    (:func:`trainforge.golden.fp.fp32_accumulate`, the TensorDash PEs'): the
    products that reach the accumulate stage since the last ``mac_clear``
    (that product included; reset counts as a clear) are numbered ``j = 0, 1,
    ...`` and product ``j`` is added to partial ``j mod P``, which starts from
    ``+0`` (``partial = round32(+0 + p_j)`` for ``j < P``, then
    ``round32(partial + p_j)``); a product's *result* is the pairwise sum of
    the ``P`` partials as they are after it, a partial not written since the
    clear counting as ``+0``: ``(q0 + q1) + (q2 + q3)`` for 4 (``q0 + q1``
    for 2; ``((q0 + q1) + (q2 + q3)) + ((q4 + q5) + (q6 + q7))`` for 8).
    The result reaches ``acc`` (and ``red`` with the product's ``handoff``)
    :func:`~trainforge.spec.caterpillar.pe_accumulate_latency` cycles after
    the accumulate stage. So a sum of ``n`` products is not the sequential
    ``((p0 + p1) + p2) + ...``: with 4 partials, ``p0 + p4 + p8 + ...``,
    ``p1 + p5 + ...``, ... each in order, then the tree.

    ``reduction_partials`` (``fp16`` only) chooses the reduction register's
    adder the same way. 1: ``red = round32(red + red_in)`` in the ``red_add``
    cycle. ``P`` of 2, 4 or 8: the same interleaved accumulator on the
    reduction's rows: a landing handoff is a clear row (its value, row 0 of a
    new reduction; it is also written into ``red`` in its own cycle, as
    before), a ``red_add`` cycle without a landing handoff is the next row
    (its ``red_in``). Row ``j`` goes to partial ``j mod P``; the result of a
    ``red_add`` row, the pairwise sum of the partials after it, is written into
    ``red`` :func:`~trainforge.spec.caterpillar.pe_reduction_latency` cycles
    after the row (a handoff landing in that cycle wins). The bus reduction of
    ``n_r`` partial sums ``v0`` (the diagonal PE's own handoff), ``v1``, ...
    at ``P`` 4 and ``n_r`` 4 is thus ``(v0 + v1) + (v2 + v3)`` (each ``+0 + v``
    first, exact but for a ``-0``), not ``((v0 + v1) + v2) + v3``.
"""
import numpy as np

from ...spec.caterpillar import (FP16_MAC, PE_MAC_LATENCY, PE_PARAMS, PE_READ_LATENCY, MacOp, params_with_defaults,
                                  pe_accumulate_latency, pe_reduction_latency)
from ..dense_pe import wrap
from ..fp import fp32_accumulate, fp32_add, fp_mul_exact

__all__ = ["segmented_sum", "fp16_multiply_accumulate", "cp_pe"]


def fp16_multiply_accumulate(addend_bits, a_bits, b_bits):
    """The ``fp16`` MAC's accumulate step: ``addend + a * b``, FP32 bits.

    ``a * b`` is the exact FP32 product of two FP16 operands (no rounding),
    then one FP32 addition rounds the sum to nearest even: one rounding in
    all, a fused multiply-add with an FP32 addend.

    Parameters
    ----------
    addend_bits : array_like of int
        FP32 bit patterns (the accumulator, or ``+0`` after a clear).
    a_bits, b_bits : array_like of int
        FP16 bit patterns (broadcast with ``addend_bits``).

    Returns
    -------
    numpy.ndarray of uint32
    """
    return fp32_add(addend_bits, fp_mul_exact(a_bits, b_bits, FP16_MAC["operand"]))


def segmented_sum(starts, start_values, increments):
    """Running sum that restarts from ``start_values[t]`` wherever ``starts[t]``, else adds ``increments[t]``.

    Before the first start the sum begins from zero. All values are ``uint64`` (modulo ``2**64``).

    Returns
    -------
    numpy.ndarray of uint64
        The value after each step.
    """
    starts = np.asarray(starts, dtype=bool)
    start_values = np.asarray(start_values, dtype=np.uint64)
    increments = np.where(starts, np.uint64(0), np.asarray(increments, dtype=np.uint64))
    running = np.cumsum(increments, dtype=np.uint64)
    steps = np.arange(len(starts))
    last_start = np.maximum.accumulate(np.where(starts, steps, -1))
    anchor = np.maximum(last_start, 0)
    base = np.where(last_start >= 0, start_values[anchor] - running[anchor], np.uint64(0))
    return base + running


def _delayed(values, cycles, fill=0):
    """``values`` delayed by ``cycles`` steps (the first ``cycles`` entries are ``fill``)."""
    values = np.asarray(values)
    return np.concatenate((np.full(cycles, fill, dtype=values.dtype), values[:len(values) - cycles]))


def cp_pe(memory, rd_addr, mac_op, mac_clear, handoff, red_add, row_bus, col_bus, red_in, rd_en=None,
          **params):
    """Accumulator and reduction register of a PE after each enabled cycle.

    The stimulus is given per enabled cycle (cycles with ``en`` low change
    nothing and are left out). ``rd_addr[t]`` is the issue-stage read of cycle
    ``t`` when ``rd_en[t]`` (default: every cycle); its word is ``mem_data`` in
    cycle ``t + PE_READ_LATENCY``; a cycle without ``rd_en`` reads nothing and
    its ``mem_data`` two cycles later is the last word read (zero before any
    read and before cycle ``PE_READ_LATENCY``: the registers' reset value; the word of the read port
    itself in cycle ``PE_READ_LATENCY - 1`` is not modelled, no MAC may take
    it). The operand stage of cycle ``t`` (``mac_op``, the buses,
    ``mem_data``) reaches the accumulate stage in cycle
    ``t + PE_MAC_LATENCY``, with its ``mac_clear`` and ``handoff``; ``red_add``
    and ``red_in`` act in their own cycle, unless a handoff lands then.

    Parameters
    ----------
    memory : array_like of int
        The SRAM contents (written before the sequence).
    rd_addr : array_like of int, shape (T,)
    rd_en : array_like of bool, shape (T,), optional
    mac_op : array_like of int, shape (T,)
        :class:`~trainforge.spec.caterpillar.MacOp` values.
    mac_clear, handoff, red_add : array_like of bool, shape (T,)
    row_bus, col_bus, red_in : array_like of int, shape (T,)
        Bus values, within ``acc_width`` bits.

    Returns
    -------
    acc, red, mem_data : numpy.ndarray of int64, shape (T,)
        The registers after each cycle and the ``mem_data`` output during it.
    """
    resolved = params_with_defaults(PE_PARAMS, params)
    width, acc_width = resolved["width"], resolved["acc_width"]
    if resolved["mac"] == "fp16":
        return _cp_pe_fp16(memory, rd_addr, mac_op, mac_clear, handoff, red_add, row_bus, col_bus, red_in, rd_en,
                           resolved["partial_sums"], resolved["reduction_partials"])
    memory = np.asarray(memory, dtype=np.int64)
    rd_addr = np.asarray(rd_addr, dtype=np.int64)
    mac_op = np.asarray(mac_op, dtype=np.int64)
    read = np.ones(len(rd_addr), dtype=bool) if rd_en is None else np.asarray(rd_en, dtype=bool)
    # The read port holds the word of the last enabled read (zero before the first).
    last_read = np.maximum.accumulate(np.where(read, np.arange(len(rd_addr)), -1))
    port = np.where(last_read >= 0, memory[rd_addr[np.maximum(last_read, 0)]], 0)
    mem_data = _delayed(port, PE_READ_LATENCY).astype(np.int64)
    row_operand = wrap(np.asarray(row_bus, dtype=np.int64).astype(np.uint64), width, True)
    col_operand = wrap(np.asarray(col_bus, dtype=np.int64).astype(np.uint64), width, True)
    first = np.where((mac_op == MacOp.ROW_MEM) | (mac_op == MacOp.ROW_COL), row_operand, col_operand)
    second = np.where(mac_op == MacOp.ROW_COL, col_operand, mem_data)
    active = mac_op != MacOp.NONE
    product = np.where(active, first.astype(np.uint64) * second.astype(np.uint64), np.uint64(0))
    # Everything of the operand stage lands in the accumulate stage PE_MAC_LATENCY cycles later.
    product = _delayed(product, PE_MAC_LATENCY)
    restart = _delayed(active & np.asarray(mac_clear, dtype=bool), PE_MAC_LATENCY, False)
    acc = segmented_sum(restart, product, product)
    handoff = _delayed(np.asarray(handoff, dtype=bool), PE_MAC_LATENCY, False)
    adds = np.asarray(red_add, dtype=bool) & ~handoff
    red = segmented_sum(handoff, acc, np.where(adds, np.asarray(red_in, dtype=np.int64).astype(np.uint64),
                                               np.uint64(0)))
    return wrap(acc, acc_width, True), wrap(red, acc_width, True), mem_data


def _cp_pe_fp16(memory, rd_addr, mac_op, mac_clear, handoff, red_add, row_bus, col_bus, red_in, rd_en,
                partial_sums=1, reduction_partials=1):
    """:func:`cp_pe` with ``mac="fp16"`` (``width`` 16, ``acc_width`` 32): same pipeline, FP arithmetic."""
    operand, accumulator = FP16_MAC["operand"], FP16_MAC["accumulator"]
    operand_mask, accumulator_mask = (1 << operand.width) - 1, (1 << accumulator.width) - 1
    memory = np.asarray(memory, dtype=np.int64) & operand_mask
    rd_addr = np.asarray(rd_addr, dtype=np.int64)
    mac_op = np.asarray(mac_op, dtype=np.int64)
    cycles = len(rd_addr)
    read = np.ones(cycles, dtype=bool) if rd_en is None else np.asarray(rd_en, dtype=bool)
    last_read = np.maximum.accumulate(np.where(read, np.arange(cycles), -1))
    port = np.where(last_read >= 0, memory[rd_addr[np.maximum(last_read, 0)]], 0)
    mem_data = _delayed(port, PE_READ_LATENCY).astype(np.int64)
    row_operand = np.asarray(row_bus, dtype=np.int64) & operand_mask
    col_operand = np.asarray(col_bus, dtype=np.int64) & operand_mask
    first = np.where((mac_op == MacOp.ROW_MEM) | (mac_op == MacOp.ROW_COL), row_operand, col_operand)
    second = np.where(mac_op == MacOp.ROW_COL, col_operand, mem_data)
    active = mac_op != MacOp.NONE
    # Multiply stage: exact FP32 products; they reach the accumulate stage PE_MAC_LATENCY cycles later.
    product = _delayed(fp_mul_exact(first, second, operand), PE_MAC_LATENCY)
    active = _delayed(active, PE_MAC_LATENCY, False)
    clear = _delayed(np.asarray(mac_clear, dtype=bool), PE_MAC_LATENCY, False)
    landing = _delayed(np.asarray(handoff, dtype=bool), PE_MAC_LATENCY, False)
    red_add = np.asarray(red_add, dtype=bool)
    red_in = np.asarray(red_in, dtype=np.int64) & accumulator_mask
    if partial_sums != 1:
        acc_trace, handoff, handoff_value = _interleaved_accumulate(product, active, clear, landing, partial_sums)
    else:
        acc_trace, handoff, handoff_value = _one_cycle_accumulate(product, active, clear, landing)
    if reduction_partials != 1:
        red_trace = _interleaved_reduce(handoff, handoff_value, red_add, red_in, reduction_partials)
    else:
        red_trace = _one_cycle_reduce(handoff, handoff_value, red_add, red_in)
    return (wrap(acc_trace.astype(np.uint64), accumulator.width, True),
            wrap(red_trace.astype(np.uint64), accumulator.width, True),
            wrap(mem_data.astype(np.uint64), operand.width, True))


def _one_cycle_accumulate(product, active, clear, landing):
    """The one-cycle accumulate stage: ``acc`` after each cycle, and the handoffs that land (``red`` is written
    with their value at the end of that cycle) with their values.

    ``product``, ``active``, ``clear``, ``landing`` (the handoff flag) are those of the accumulate stage of each
    cycle.
    """
    cycles = len(active)
    acc_trace = np.zeros(cycles, dtype=np.uint32)
    handoff_value = np.zeros(cycles, dtype=np.uint32)
    acc = np.uint32(0)  # the register's reset value: FP32 +0
    for cycle in range(cycles):
        if active[cycle] or landing[cycle]:  # a handoff comes only with a MAC
            total = fp32_add(np.uint32(0) if clear[cycle] else acc, product[cycle])
            handoff_value[cycle] = total
        if active[cycle]:
            acc = total
        acc_trace[cycle] = acc
    return acc_trace, np.asarray(landing, dtype=bool), handoff_value


def _interleaved_accumulate(product, active, clear, handoff, partial_sums):
    """:func:`_one_cycle_accumulate` with the interleaved accumulator (:func:`cp_pe`'s module docstring): every
    row's result lands ``pe_accumulate_latency(partial_sums)`` cycles after its accumulate stage, a handoff with
    it; a handoff without a MAC is ignored."""
    cycles = len(active)
    latency = pe_accumulate_latency(partial_sums)
    rows = np.flatnonzero(active)
    # Every product's result: the pairwise sum of the partials after it (clears restart the numbering).
    results = fp32_accumulate(product[rows].astype(np.uint32), clear[rows], partial_sums) if len(rows) else []
    landed = np.zeros(cycles, dtype=bool)
    landed_value = np.zeros(cycles, dtype=np.uint32)
    landing = np.zeros(cycles, dtype=bool)
    for row, result in zip(rows, results):
        if row + latency < cycles:
            landed[row + latency], landed_value[row + latency] = True, result
            landing[row + latency] = handoff[row]
    acc_trace = np.zeros(cycles, dtype=np.uint32)
    acc = np.uint32(0)  # the register's reset value: FP32 +0
    for cycle in range(cycles):
        if landed[cycle]:
            acc = landed_value[cycle]
        acc_trace[cycle] = acc
    return acc_trace, landing, landed_value


def _one_cycle_reduce(handoff, handoff_value, red_add, red_in):
    """``red`` after each cycle with the one-cycle reduction add: a landing handoff writes its value, else
    ``red_add`` writes ``round32(red + red_in)``."""
    red_trace = np.zeros(len(handoff), dtype=np.uint32)
    red = np.uint32(0)  # the register's reset value: FP32 +0
    for cycle in range(len(handoff)):
        if handoff[cycle]:
            red = handoff_value[cycle]
        elif red_add[cycle]:
            red = fp32_add(red, red_in[cycle])
        red_trace[cycle] = red
    return red_trace


def _interleaved_reduce(handoff, handoff_value, red_add, red_in, reduction_partials):
    """``red`` after each cycle with the interleaved reduction of ``reduction_partials`` partials.

    The rows of the reduction are the cycles with a landing handoff (a clear row: its value starts a new
    reduction) or else a ``red_add`` (its ``red_in``); they go through
    :func:`~trainforge.golden.fp.fp32_accumulate` (row ``j`` since the clear into partial ``j mod P``, the
    result of a row the pairwise sum of the partials after it; reset counts as a clear). A landing handoff
    writes ``red`` at the end of its own cycle, as with the one-cycle add; a ``red_add`` row's result is written
    ``pe_reduction_latency(P)`` cycles later, unless a handoff lands in that cycle (the handoff wins).
    """
    cycles = len(handoff)
    latency = pe_reduction_latency(reduction_partials)
    row_flags = handoff | red_add
    rows = np.flatnonzero(row_flags)
    values = np.where(handoff, handoff_value, red_in).astype(np.uint32)
    adds = ~handoff[rows]
    results = (fp32_accumulate(values[rows], handoff[rows], reduction_partials, read=adds)
               if adds.any() else [])
    landed = np.zeros(cycles, dtype=bool)
    landed_value = np.zeros(cycles, dtype=np.uint32)
    for row, result in zip(rows[adds], results):
        if row + latency < cycles:
            landed[row + latency], landed_value[row + latency] = True, result
    red_trace = np.zeros(cycles, dtype=np.uint32)
    red = np.uint32(0)  # the register's reset value: FP32 +0
    for cycle in range(cycles):
        if handoff[cycle]:
            red = handoff_value[cycle]
        elif landed[cycle]:
            red = landed_value[cycle]
        red_trace[cycle] = red
    return red_trace
