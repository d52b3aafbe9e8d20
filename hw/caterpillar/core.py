"""LAC core of CATERPILLAR (Fig. 3(b)): n_r x n_r PEs, row and column broadcast buses, microcoded sequencer."""
from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.caterpillar import (CORE_PARAMS, PE_MAC_LATENCY, READ_STAGE_LATENCY, UPDATE_SUBTRACT_STAGES_FP16,
                                 CommandField, CoreOp, MacOp, addr_width,
                                 core_accumulate_latency, core_cmd_layout, core_command_limits, core_data_layout,
                                 core_error_layout, core_reduction_latency, core_result_layout, core_update_drain,
                                 count_shape, gemv_final_gap, gemv_landing_collisions, reduction_cycles,
                                 shift_bits, update_write_back_stages)
from ..fp.add import fp32_add
from ..fp.convert import fp16_to_fp32, fp32_scale_down, fp32_to_fp16_pipelined
from ..stream_stage import StreamStage
from ..synthesis import replica_attrs
from .pe import CPPE

__all__ = ["CoreOp", "CPCore"]


class CPCore(wiring.Component):
    """An ``n_r x n_r`` linear algebra core running GEMV (forward and backward), GEMM and weight-update microprograms.

    Data mapping (see :mod:`trainforge.golden.caterpillar.core`): ``W[i, j]``
    of an ``m x n`` matrix lives in PE ``(i % n_r, j % n_r)`` at address
    ``base + (j // n_r) * Mb + i // n_r``; matrices are zero-padded to whole
    ``n_r x n_r`` blocks (``Mb``, ``Nb`` blocks).

    Each command on ``i_cmd`` names a microprogram and its block counts. The
    sequencer issues one micro-operation per cycle into the execute pipeline
    (issue; the read stage: local SRAM and buffer reads from registered
    enables and addresses; then the buffers' words and the registered bus
    drivers, with the PEs' SRAM output registers; the multiplier's input and
    output registers; the accumulate stage,
    :data:`~trainforge.spec.caterpillar.EXECUTE_LATENCY` cycles after issue,
    after which the reduction, the read-out and the UPDATE write-back run):

    - ``GEMV_FORWARD`` (``mb``, ``nb``, ``base``, ``overlap``): reads ``Mb``
      words of ``x`` from ``i_data`` (kept in the vector buffer for the later
      output blocks). For each output block ``jb``, ``Mb`` cycles broadcast
      ``x`` on the row buses while every PE accumulates
      ``x[i] * W[i, j]``; the last MAC hands the partial sums to the
      reduction registers, the reduction engine sums each column into its
      diagonal PE (``reduction``: ``n_r - 1`` cycles on the column bus, or
      ``ceil(log2 n_r)`` over the neighbour links), and the diagonal PEs send
      ``y[jb * n_r + c]`` on lane ``c`` of ``o_data``. Without ``overlap``
      (SGD) the MACs of the next block wait for the reduction and the
      broadcast; with ``overlap`` (CP) they run during it, since the
      reduction uses the column buses and the MACs the row buses.
    - ``GEMV_BACKWARD``: the same with the weights left in place: ``Nb`` words
      of ``e`` on the column buses, reduction along the row buses, ``Mb``
      output words ``d = W e``.
    - ``GEMM`` (``mb``, ``nb`` = ``Kb``, ``qb``): for each output block
      ``(qb, ib)`` (``qb`` outer), ``Kb * n_r`` rank-1 updates: the PEs of
      PE column ``p % n_r`` broadcast ``W[:, p]`` on the row buses, ``i_data``
      brings ``B[p, qb * n_r : (qb + 1) * n_r]`` on the column buses; then the
      block is read out row by row, ``n_r`` words.
    - ``LOAD`` (``mb``, ``nb``, ``base``): ``Mb * Nb * n_r`` words from
      ``i_data``; word ``a * n_r + r`` writes lane ``c`` into PE ``(r, c)`` at
      ``base + a``.
    - ``UPDATE`` (``mb``, ``nb``, ``qb`` = the batch ``b``, ``base``,
      ``shift``): the rank-``b`` weight update in place. ``b * Mb`` ``i_data``
      words bring the input vectors ``x_s`` (word ``ib * b + s``) into the
      vector buffer; then, for each row block ``ib``, ``b * Nb`` cycles
      (``jb`` outer, ``s`` inner) broadcast ``x_s`` on the row buses and the
      scaled error ``e_s`` on the column buses (from ``i_data``, word
      ``jb * b + s``, in the first row block, kept in the error buffer for
      the others); every PE accumulates ``P = sum_s x_s[i] e_s[j]`` for the
      weight word it read at ``base + jb * Mb + ib`` and, in the execute
      stage of the last sample, writes back ``W - round(P / 2**shift)``
      saturated to ``width`` bits (:func:`trainforge.golden.caterpillar.core.update`).
      Needs ``b * Mb <= max_blocks`` and ``b * Nb <= max_blocks`` (the two
      buffers); ``overlap`` is ignored.

    Out-of-range commands: when a command is accepted its fields are compared with their ranges
    (:func:`~trainforge.spec.caterpillar.core_command_limits`, constants of the parameters: ``op`` a
    :class:`CoreOp`; ``mb``, ``nb`` and, for GEMM and UPDATE, ``qb`` in ``1 .. max_blocks``; ``base`` below
    ``sram_depth``; for UPDATE ``qb * mb`` and ``qb * nb`` at most ``max_blocks``, as ``mb <= max_blocks // qb``
    from a table indexed by ``qb``) and the outcome is registered with the command. A rejected command is not
    executed: it issues nothing, takes no ``i_data`` word, writes no memory and produces no ``o_data`` word;
    in the cycle after its acceptance its error word (``field``, the
    :class:`~trainforge.spec.caterpillar.CommandField` of the first field out of range, and ``op``) enters the
    ``o_error`` stream's stage (on ``o_error`` one cycle later), and the next command is accepted the cycle
    after that hand-off (``i_cmd.ready`` stays low while the stage is full).

    Local SRAM and buffer reads are enabled only where their word is used (the energy events of
    :class:`~trainforge.spec.caterpillar.CoreEvent`, counted by
    :func:`trainforge.golden.caterpillar.core.counts`): every PE in a GEMV MAC, the broadcasting PE
    column in a GEMM step, every PE once per weight word in an UPDATE (with the batch's last MAC).
    The events are named one-bit signals of the Verilog (``pe_R_C_read_enable``, ``pe_R_C_write_enable``,
    ``pe_R_C_mac_enable``, ``pe_R_C_add_enable``, ``write_back``, ``vector_read_enable``,
    ``vector_write_enable``, ``error_read_enable``, ``error_write_enable``) that the testbench counts.

    A command is accepted only when the previous one has issued and drained
    (its last block's gap; after an UPDATE the
    :func:`~trainforge.spec.caterpillar.core_update_drain` cycles that let its
    last write-back land before the next command's first read: the
    read-after-write stall). The execute pipeline has no enable: it advances
    every cycle. Only the issue stage waits, issuing nothing (a bubble, a NONE
    micro-operation) while a needed ``i_data`` word is missing or while the
    output FIFO has no room reserved for the results of a block about to
    start: a GEMV or GEMM block reserves its words (1 or ``n_r``) before its
    first micro-operation issues, and a word leaving ``o_data`` returns its
    room (credits). ``o_data`` is the FIFO's output
    (``output_depth`` words, enough that credits never hold back an
    unstalled run), so no ``ready`` of ``i_cmd`` or ``i_data`` depends
    combinationally on ``o_data.ready``. Without stalls the cycle schedule is
    :func:`trainforge.golden.caterpillar.core.schedule`, a result word on
    ``o_data`` one cycle after the cycle the reduction or the GEMM read-out
    writes it into the FIFO (:data:`~trainforge.spec.caterpillar.OUTPUT_LATENCY`).

    With ``mac="fp16"`` (the paper's half-precision FPU; ``width`` 16, ``acc_width`` 32) the same schedule runs
    on bit patterns: the weights and the ``i_data`` operands are FP16, the PEs' sums, the reductions and the
    ``o_data`` results FP32 (every add one FP32 rounding, in the order of
    :mod:`trainforge.golden.caterpillar.core_fp16`), and UPDATE writes back ``fp16(W - P * 2**-shift)``
    (:meth:`_updated_weight_fp16`), over more stages
    (:func:`~trainforge.spec.caterpillar.update_write_back_stages`: 11, its FP32 subtraction and its rounding to
    FP16 pipelined and the rounded weight registered), so the UPDATE drains longer
    (:func:`~trainforge.spec.caterpillar.core_update_drain`: 14 instead of 6).

    With ``fp16``, ``partial_sums`` above 1 builds every PE with the interleaved accumulator: the PE sums are in
    its order, and every event after the accumulate stage (the handoffs, the reduction, the GEMV outputs, the
    GEMM read-out, the UPDATE write-back) comes
    :func:`~trainforge.spec.caterpillar.core_accumulate_latency` cycles later; the UPDATE drains that much longer
    (:func:`~trainforge.spec.caterpillar.core_update_drain`). ``reduction_partials`` above 1 (``bus`` only) builds
    the interleaved reduction register: the bus reduction keeps one ``red_in`` per cycle, its sum is written
    :func:`~trainforge.spec.caterpillar.core_reduction_latency` cycles after the last one and copied into the
    output FIFO in the next cycle; a GEMV's last block drains that much longer
    (:func:`~trainforge.spec.caterpillar.gemv_final_gap`) and a block period that would land a handoff in the
    cycle a sum is written is lengthened (:func:`~trainforge.spec.caterpillar.gemv_block_gap`).

    Parameters
    ----------
    n_r : int
        PEs per row and column.
    width, acc_width, sram_depth, mac :
        PE parameters (:class:`~trainforge.hw.caterpillar.pe.CPPE`).
    max_blocks : int
        Largest block count of a command; also the depth of the vector buffer.
    reduction : str
        ``"bus"`` or ``"tree"`` (neighbour links).
    partial_sums : int
        ``fp16`` only: 1, or the partial sums of every PE's interleaved accumulator (2, 4, 8).
    reduction_partials : int
        ``fp16`` and ``bus`` only: 1, or the partials of every PE's interleaved reduction (2, 4, 8).

    Members
    -------
    i_cmd : In(stream.Signature(cmd_layout))
    i_data : In(stream.Signature(data_layout))
        ``n_r`` operands per word.
    o_data : Out(stream.Signature(result_layout))
        ``n_r`` results per word.
    o_error : Out(stream.Signature(error_layout))
        One word per rejected command: ``field`` (a :class:`~trainforge.spec.caterpillar.CommandField`), ``op``.

    Attributes
    ----------
    cmd_layout : data.StructLayout
        ``op`` (a :class:`CoreOp`), ``overlap``, ``mb``, ``nb``, ``qb`` (block counts, at least 1; UPDATE:
        ``qb`` is the batch), ``base``, ``shift`` (UPDATE only: ``0 .. 2**shift_bits - 1``).
    data_layout, result_layout : data.ArrayLayout
    error_layout : data.StructLayout
    reduction_cycles : int
    shift_bits : int
        Width of the ``shift`` field, ``max(1, bit_length(acc_width - 1))``.
    output_depth : int
        Words of the output FIFO: ``2 n_r + 2 (R + 1) + 8`` (plus the accumulate and reduction latencies, which
        hold each block's room that much longer). Without stalls a block's room is held from
        its first issue to its last word on ``o_data``, ``steps + EXECUTE_LATENCY + R + 2`` cycles (GEMM:
        ``+ n_r``), while blocks start at least ``max(steps, R + 1)`` (GEMM: ``steps + n_r``) apart: at
        most ``ceil((R + 8) / (R + 1)) <= 5`` GEMV words or two or three GEMM blocks of ``n_r`` words
        (three only at ``n_r = 2``) at once, fewer than the depth, so credits never hold back an
        unstalled run (the cycle-exact scenarios check it).
    """

    PARAMS = CORE_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.reduction_cycles = reduction_cycles(self.n_r, self.reduction)
        self.addr_width = addr_width(self.sram_depth)
        self.shift_bits = shift_bits(self.acc_width)
        self.cmd_layout = core_cmd_layout(self.params)
        self.data_layout = core_data_layout(self.params)
        self.result_layout = core_result_layout(self.params)
        self.error_layout = core_error_layout(self.params)
        # With the interleaved accumulator and reduction every event after the accumulate stage comes
        # accumulate_latency later, and each GEMV output reduction_latency later still.
        self.accumulate_latency = core_accumulate_latency(self.params)
        self.reduction_latency = core_reduction_latency(self.params)
        self.landing_collisions = gemv_landing_collisions(self.params)
        self.output_depth = (2 * self.n_r + 2 * (self.reduction_cycles + 1) + 8
                             + self.accumulate_latency + self.reduction_latency)
        super().__init__({
            "i_cmd": In(stream.Signature(self.cmd_layout)),
            "i_data": In(stream.Signature(self.data_layout)),
            "o_data": Out(stream.Signature(self.result_layout)),
            "o_error": Out(stream.Signature(self.error_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        self._buses = None  # the bus reduction's buses, built into this module by _reduction_buses
        n_r, reduction_cycles = self.n_r, self.reduction_cycles
        pes = [[CPPE(width=self.width, acc_width=self.acc_width, sram_depth=self.sram_depth, mac=self.mac,
                     partial_sums=self.partial_sums, reduction_partials=self.reduction_partials)
                for _ in range(n_r)] for _ in range(n_r)]
        for r in range(n_r):
            for c in range(n_r):
                pes[r][c].build_into(m, f"pe_{r}_{c}", platform)

        # ---- command registers and the issue-stage sequencer ----
        # Every combinational selection below is a ``Mux`` or a ``word_select``, never an
        # ``m.Switch``/``m.If`` in the comb domain: Amaranth writes those as ``always @*``
        # processes, which Icarus (``-g2012``) does not evaluate at time 0, so a process whose
        # inputs keep their reset values stays 'x' (see the README, "Icarus and always @*").
        #
        # No multiply and no division: a block of micro-operations is counted by three nested
        # counters (``lane`` innermost, ``inner``, ``outer``) against limits registered when the
        # command is accepted, and the local address is a strided counter.
        #   GEMV forward: outer = ib (Mb), blocks jb;  backward: outer = jb (Nb), blocks ib;
        #   GEMM: outer = kb, lane = p % n_r (p = kb * n_r + lane), blocks ib, then qb;
        #   LOAD: outer = ib, lane = r, blocks jb;  UPDATE: inner = s, outer = ib (phase 0, x)
        #   or jb (phase 1, the MACs), blocks ib of phase 1.
        cmd = Signal(self.cmd_layout)
        busy = Signal()
        in_gap = Signal()
        counts = count_shape(self.max_blocks)
        step = Signal(range(self.max_blocks * self.max_blocks * n_r + 1))  # micro-operations so far in the block
        gap_count = Signal(range(reduction_cycles + n_r + core_update_drain(self.params) + 2
                                 + self.reduction_latency + max(self.landing_collisions)))  # idle cycles left after this one
        block_a = Signal(range(self.max_blocks + 1))  # jb (forward, LOAD), ib (backward, GEMM, UPDATE)
        block_b = Signal(range(self.max_blocks + 1))  # qb (GEMM); the phase of an UPDATE (0: take x, 1: MACs)
        lane = Signal(range(n_r))
        inner = Signal(counts)
        outer = Signal(counts)
        # Limits registered at acceptance (``*_last``: the last value of a counter).
        mb_last = Signal(counts)
        nb_last = Signal(counts)
        lane_last = Signal(range(n_r))
        inner_last = Signal(counts)
        outer_last_first = Signal(counts)  # UPDATE: of phase 0 (phase 1 counts to nb_last)
        block_a_last = Signal(counts)  # UPDATE: of phase 1 (phase 0 has one block)
        block_b_last = Signal(counts)
        middle_gap = Signal.like(gap_count)  # idle cycles after a block that is not the last
        final_gap = Signal.like(gap_count)  # the drain after the last block
        # Strided address counters: the local address of the issued micro-operation, the address of the
        # first word of the current block (backward, GEMM, UPDATE), the first vector buffer word of the
        # current UPDATE row block (ib * b).
        read_addr = Signal(self.addr_width)
        block_start = Signal(self.addr_width)
        vector_row = Signal(range(self.max_blocks + 1))
        op = cmd.op
        is_forward = op == CoreOp.GEMV_FORWARD
        is_backward = op == CoreOp.GEMV_BACKWARD
        is_gemm = op == CoreOp.GEMM
        is_load = op == CoreOp.LOAD
        is_update = op == CoreOp.UPDATE
        is_gemv = is_forward | is_backward
        # Flags of the block counters, registered: each is loaded with its next value wherever ``block_a`` or
        # ``block_b`` change (acceptance, ``next_block``), so no comparison of the counters lies between them
        # and the issue decision (the critical path at 96.5 MHz ran block_b -> these comparisons -> the gap ->
        # block_b).
        update_macs = Signal()  # the MAC phase of an UPDATE (block_b 1; block_b 0 takes x)
        outer_last = Signal(counts)  # the last value of ``outer``: nb_last in UPDATE's MAC phase, else outer_last_first
        block_a_wraps = Signal()  # block_a == (0 in UPDATE's phase 0, else block_a_last)
        block_b_at_last = Signal()  # block_b == block_b_last
        first_pass = Signal()  # block_a == 0
        middle_gap_zero = Signal()
        final_gap_zero = Signal()

        lane_wraps = lane == lane_last
        inner_wraps = lane_wraps & (inner == inner_last)
        last_step = inner_wraps & (outer == outer_last)
        last_block = block_a_wraps & block_b_at_last
        gap = Mux(last_block, final_gap, middle_gap)
        gap_zero = Mux(last_block, final_gap_zero, middle_gap_zero)

        issuing = busy & ~in_gap
        # GEMV: the vector arrives on i_data during the first output block; UPDATE: x during the
        # first phase, e during the first row block of the MAC phase.
        needs_input = issuing & (is_gemm | is_load | ((is_gemv | is_update) & first_pass))
        # The result words (GEMV: after the reduction; GEMM: a read-out row) leave through a FIFO whose
        # room a block reserves (credits) before its first micro-operation issues, so the execute pipeline
        # never waits for o_data: it has no enable. The issue stage alone waits (issues nothing, a bubble)
        # for a missing i_data word or for room for the block's results.
        m.submodules.output_fifo = output_fifo = fifo.SyncFIFO(width=self.result_layout.size,
                                                               depth=self.output_depth)
        output_now = Signal()
        # Registered: the results of the command's blocks (1 GEMV word, n_r GEMM words, none), whether no
        # micro-operation of the current block has issued yet, and whether the FIFO has room for a block.
        block_words = Signal(range(n_r + 1))
        block_unstarted = Signal()
        credits = Signal(range(self.output_depth + 1), init=self.output_depth)
        has_room = Signal(init=1)
        starts_block = issuing & block_unstarted & (block_words != 0)
        room = ~starts_block | has_room
        input_present = ~needs_input | self.i_data.valid
        issue = Signal()
        # ---- range checks of the offered command (constants of the parameters), registered at acceptance ----
        rejected, reject_field = self._range_checks(m, self.i_cmd.payload)
        error_pending = Signal()  # a rejected command's error word waits for the error stream's stage
        error_word = Signal(self.error_layout)
        m.submodules.error_stage = error_stage = StreamStage(self.error_layout)
        wiring.connect(m, error_stage.o_stream, wiring.flipped(self.o_error))
        m.d.comb += [error_stage.i_stream.valid.eq(error_pending), error_stage.i_stream.payload.eq(error_word)]
        with m.If(error_stage.i_stream.ready):
            m.d.sync += error_pending.eq(0)
        m.d.comb += [
            issue.eq(issuing & input_present & room),
            self.i_data.ready.eq(needs_input & room),
            self.i_cmd.ready.eq(~busy & ~error_pending),
            self.o_data.valid.eq(output_fifo.r_rdy),
            self.o_data.payload.eq(output_fifo.r_data),
            output_fifo.r_en.eq(self.o_data.ready),
        ]
        accepting = self.i_cmd.valid & self.i_cmd.ready
        given_words = Mux(self.i_cmd.payload.op == CoreOp.GEMM, n_r,
                          Mux((self.i_cmd.payload.op == CoreOp.GEMV_FORWARD)
                              | (self.i_cmd.payload.op == CoreOp.GEMV_BACKWARD), 1, 0))
        # A word that left o_data returns its credit one cycle later (registered: the FIFO's level and the
        # consumer's ready no longer run through the credit adder into has_room; the critical path at 97.3 MHz).
        # The credits only under-count, for one cycle, so the FIFO still never overflows.
        credit_returned = Signal()
        m.d.sync += credit_returned.eq(self.o_data.valid & self.o_data.ready)
        credits_next = Signal.like(credits)
        m.d.comb += credits_next.eq(credits - Mux(issue & starts_block, block_words, 0) + credit_returned)
        m.d.sync += [
            credits.eq(credits_next),
            has_room.eq(credits_next >= Mux(accepting, given_words, block_words)),
        ]
        with m.If(accepting):
            m.d.sync += block_words.eq(given_words)

        # The limits and flags of the offered command (registered at acceptance below).
        given = self.i_cmd.payload
        given_forward = given.op == CoreOp.GEMV_FORWARD
        given_gemv = given_forward | (given.op == CoreOp.GEMV_BACKWARD)
        given_gemm = given.op == CoreOp.GEMM
        given_load = given.op == CoreOp.LOAD
        given_update = given.op == CoreOp.UPDATE
        gemv_steps = Mux(given_forward, given.mb, given.nb)
        # Without overlap a GEMV block waits for the reduction and the output (R + 1); with
        # overlap only for what they need beyond the next block's MACs.
        overlapped = reduction_cycles + 1 - gemv_steps
        if (1 << len(gemv_steps)) - 1 > reduction_cycles + 1:  # else the count never exceeds R + 1 (and
            # Verilator's CMPCONST refuses a comparison that is always false)
            overlapped = Mux(gemv_steps > reduction_cycles + 1, 0, overlapped)
        gemv_gap = Mux(given.overlap, overlapped, reduction_cycles + 1)
        if self.reduction_latency:
            gemv_gap = self._avoid_landing_collisions(m, gemv_steps, gemv_gap)
        given_middle_gap = Signal.like(middle_gap)
        given_final_gap = Signal.like(final_gap)
        given_block_a_last = Signal.like(block_a_last)
        given_block_b_last = Signal.like(block_b_last)
        given_outer_last = Signal.like(outer_last_first)
        m.d.comb += [
            given_middle_gap.eq(Mux(given_gemv, gemv_gap, Mux(given_gemm, n_r, 0))),
            given_final_gap.eq(Mux(given_gemv, gemv_final_gap(self.params),
                                   Mux(given_gemm, n_r, Mux(given_update, core_update_drain(self.params), 0)))),
            given_block_a_last.eq(Mux(given_forward | given_load, given.nb - 1, given.mb - 1)),
            given_block_b_last.eq(Mux(given_gemm, given.qb - 1, Mux(given_update, 1, 0))),
            given_outer_last.eq(Mux(given_forward | given_load | given_update, given.mb - 1, given.nb - 1)),
        ]
        with m.If(self.i_cmd.valid & self.i_cmd.ready):
            m.d.sync += [
                middle_gap.eq(given_middle_gap),
                final_gap.eq(given_final_gap),
                middle_gap_zero.eq(given_middle_gap == 0),
                final_gap_zero.eq(given_final_gap == 0),
                block_a_last.eq(given_block_a_last),
                block_b_last.eq(given_block_b_last),
                outer_last_first.eq(given_outer_last),
                outer_last.eq(given_outer_last),
                update_macs.eq(0),
                first_pass.eq(1),
                block_a_wraps.eq(given_update | (given_block_a_last == 0)),
                block_b_at_last.eq(given_block_b_last == 0),
            ]
            m.d.sync += [
                error_pending.eq(rejected), error_word.field.eq(reject_field), error_word.op.eq(given.op),
                cmd.eq(given), busy.eq(~rejected), in_gap.eq(0), step.eq(0), gap_count.eq(0), block_unstarted.eq(1),
                block_a.eq(0), block_b.eq(0), lane.eq(0), inner.eq(0), outer.eq(0),
                mb_last.eq(given.mb - 1),
                nb_last.eq(given.nb - 1),
                lane_last.eq(Mux(given_gemm | given_load, n_r - 1, 0)),
                inner_last.eq(Mux(given_update, given.qb - 1, 0)),
                read_addr.eq(given.base),
                block_start.eq(given.base),
                vector_row.eq(0),
            ]

        def next_block():
            with m.If(last_block):
                m.d.sync += busy.eq(0)
            with m.Elif(block_a_wraps):
                # The next block_b: block_a restarts at 0 and wraps at block_a_last (UPDATE: its MAC phase).
                m.d.sync += [block_a.eq(0), block_b.eq(block_b + 1), first_pass.eq(1),
                             block_a_wraps.eq(block_a_last == 0), block_b_at_last.eq(block_b + 1 == block_b_last),
                             update_macs.eq(is_update), outer_last.eq(Mux(is_update, nb_last, outer_last))]
            with m.Else():
                # block_a + 1 in the same block_b (UPDATE's phase 0 wraps at once, so the limit is block_a_last).
                m.d.sync += [block_a.eq(block_a + 1), first_pass.eq(0),
                             block_a_wraps.eq(block_a + 1 == block_a_last)]

        with m.If(busy):
            with m.If(~in_gap):
                with m.If(issue):
                    # The three counters and the step.
                    with m.If(last_step):
                        m.d.sync += [step.eq(0), lane.eq(0), inner.eq(0), outer.eq(0), block_unstarted.eq(1)]
                        with m.If(~gap_zero):
                            m.d.sync += [in_gap.eq(1), gap_count.eq(gap - 1)]
                        with m.Else():
                            next_block()
                    with m.Else():
                        m.d.sync += [step.eq(step + 1), block_unstarted.eq(0)]
                        with m.If(~lane_wraps):
                            m.d.sync += lane.eq(lane + 1)
                        with m.Else():
                            m.d.sync += lane.eq(0)
                            with m.If(~inner_wraps):
                                m.d.sync += inner.eq(inner + 1)
                            with m.Else():
                                m.d.sync += [inner.eq(0), outer.eq(outer + 1)]
                    # The local address: forward and LOAD run through the words in order (LOAD: one word per
                    # n_r micro-operations); backward, GEMM and UPDATE stride by Mb (GEMM every n_r, UPDATE every
                    # b micro-operations), then go on with the next word of the first block (back to base when
                    # block_a wraps). UPDATE: the vector buffer row ib * b follows block_a.
                    with m.If(last_step):
                        with m.If(is_forward | is_load):
                            m.d.sync += read_addr.eq(read_addr + 1)
                        with m.Elif(block_a_wraps):
                            m.d.sync += [read_addr.eq(cmd.base), block_start.eq(cmd.base), vector_row.eq(0)]
                        with m.Else():
                            m.d.sync += [read_addr.eq(block_start + 1), block_start.eq(block_start + 1),
                                         vector_row.eq(vector_row + cmd.qb)]
                    with m.Elif(is_forward):
                        m.d.sync += read_addr.eq(read_addr + 1)
                    with m.Elif(is_load | is_gemm | is_update):
                        with m.If(inner_wraps):
                            m.d.sync += read_addr.eq(read_addr + Mux(is_load, 1, cmd.mb))
                    with m.Else():  # backward
                        m.d.sync += read_addr.eq(read_addr + cmd.mb)
            with m.Else():
                with m.If(gap_count == 0):
                    m.d.sync += in_gap.eq(0)
                    next_block()
                with m.Else():
                    m.d.sync += gap_count.eq(gap_count - 1)

        transfer = self.i_data.valid & self.i_data.ready  # an i_data word is taken (and issued) this cycle
        # LOAD: the word is written one cycle after its issue, from registers (a one-hot row of PEs, the
        # address, the lanes), so no comb path runs from i_data.valid to the SRAMs' write enables.
        load_rows = Signal(n_r)
        load_addr = Signal(self.addr_width)
        load_word = Signal(self.data_layout)
        m.d.sync += load_rows.eq(Mux(transfer & is_load, Const(1, n_r) << lane, 0))
        with m.If(transfer & is_load):
            m.d.sync += [load_addr.eq(read_addr), load_word.eq(self.i_data.payload)]

        # Vector buffer: the GEMV input vector, written in the first output block, read in the others;
        # UPDATE: the b input vectors (word ib * b + s), written in the first phase, read in the second.
        m.submodules.vector_buffer = vector_buffer = memory.Memory(
            shape=self.data_layout, depth=self.max_blocks, init=[])
        vector_write = vector_buffer.write_port()
        vector_read = vector_buffer.read_port()
        # Buffer reads only where the word is used (energy events, named for the testbench's monitor): a GEMV
        # MAC after the first output block (x or e from the buffer), every UPDATE MAC (x_s), and an UPDATE MAC
        # after the first row block (e_s). A read port that is not enabled holds its word, which the operand
        # stage's registers then take again unused. Reads come READ_STAGE_LATENCY after the issue, from
        # registered enables and addresses (the read stage); writes come with the transfer.
        vector_read_enable = Signal()
        vector_read_address = Signal.like(vector_read.addr)
        vector_write_enable = Signal()
        error_read_enable = Signal()
        error_read_address = Signal.like(vector_read.addr)
        error_write_enable = Signal()
        issue_mac = issue & ~is_load & (~is_update | update_macs)
        assert READ_STAGE_LATENCY == 1, "the read stage below is one register"
        m.d.sync += [
            vector_read_enable.eq(issue_mac & ((is_gemv & ~first_pass) | is_update)),
            vector_read_address.eq(Mux(is_update, vector_row + inner, step)),
            error_read_enable.eq(issue_mac & is_update & ~first_pass),
            error_read_address.eq(step),
        ]
        m.d.comb += [
            vector_write_enable.eq(transfer & first_pass & (is_gemv | (is_update & ~update_macs))),
            error_write_enable.eq(transfer & first_pass & update_macs),
        ]
        m.d.comb += [
            vector_write.en.eq(vector_write_enable),
            vector_write.addr.eq(step),
            vector_write.data.eq(self.i_data.payload),
            vector_read.en.eq(vector_read_enable),
            vector_read.addr.eq(vector_read_address),
        ]
        # Error buffer (UPDATE): the b scaled error vectors (word jb * b + s = step), written in the
        # first row block of the MAC phase, read in the others.
        m.submodules.error_buffer = error_buffer = memory.Memory(
            shape=self.data_layout, depth=self.max_blocks, init=[])
        error_write = error_buffer.write_port()
        error_read = error_buffer.read_port()
        m.d.comb += [
            error_write.en.eq(error_write_enable),
            error_write.addr.eq(step),
            error_write.data.eq(self.i_data.payload),
            error_read.en.eq(error_read_enable),
            error_read.addr.eq(error_read_address),
        ]

        # ---- the execute pipeline: every stage advances every cycle (a bubble is a NONE micro-operation) ----
        # Stage 1, the read stage (the cycle after issue): the micro-operation's controls, its local address and
        # which PEs read it (all of them in a GEMV MAC and once per word in an UPDATE; the PE column that
        # broadcasts W[:, p] in a GEMM step), registered; the PE SRAMs and the buffers are read.
        exec_op = Signal(2)  # MacOp
        exec_clear = Signal()
        exec_handoff = Signal()
        exec_kind = Signal(3)  # the CoreOp of the micro-operation (cmd may hold the next command by its end)
        exec_from_stream = Signal()
        exec_owner = Signal(range(n_r))
        exec_word = Signal(self.data_layout)
        exec_update = Signal()  # an UPDATE MAC: x (vector buffer) on the row buses, e on the column buses
        exec_write_back = Signal()  # the last sample of an UPDATE word: write the updated weight back
        exec_addr = Signal(self.addr_width)  # the local address, read in the read stage
        # Which PEs read their SRAM in the read stage: every PE in a GEMV MAC and once per word in an UPDATE, the PE
        # column that broadcasts W[:, p] (column `lane`) in a GEMM step. One register per PE, its SRAM's read
        # enable: a replica (trainforge.hw.synthesis), kept apart by the FPGA flow so that each can sit beside its
        # PE's DP16KDs (a shared enable was a LUT and 7.95 ns of routing to a far PE's blocks; the README's
        # section "`cp_core`: the PE SRAMs' own DP16KD output register").
        exec_read = [[Signal(name=f"exec_read_{r}_{c}", attrs=replica_attrs()) for c in range(n_r)]
                     for r in range(n_r)]
        read_all = issue_mac & (is_gemv | (is_update & inner_wraps))
        read_owner = issue & is_gemm
        write_back_shift = Signal(self.shift_bits)  # the UPDATE's shift, kept for its write-backs
        m.d.sync += [
            exec_op.eq(Mux(~issue_mac, MacOp.NONE,
                           Mux(is_forward, MacOp.ROW_MEM, Mux(is_backward, MacOp.COL_MEM, MacOp.ROW_COL)))),
            exec_clear.eq(Mux(is_update, inner == 0, step == 0)),
            exec_handoff.eq(issue_mac & ~is_update & last_step),
            exec_kind.eq(op),
            exec_from_stream.eq(is_gemm | first_pass),
            exec_owner.eq(lane),
            exec_update.eq(issue_mac & is_update),
            exec_write_back.eq(issue_mac & is_update & inner_wraps),
            exec_addr.eq(read_addr),
            *(exec_read[r][c].eq(read_all | (read_owner & (lane == c))) for r in range(n_r) for c in range(n_r)),
        ]
        with m.If(issue_mac & is_update):
            m.d.sync += write_back_shift.eq(cmd.shift)
        with m.If(transfer):  # only a transferred word, never an idle (undriven) payload
            m.d.sync += exec_word.eq(self.i_data.payload)
        # Stage 2, the buffer stage: the buffers' words arrive, the PEs' SRAM output registers take theirs.
        buffer_stage = self._delay(m, [exec_op, exec_clear, exec_handoff, exec_kind, exec_owner, exec_write_back,
                                       exec_addr, exec_update, exec_from_stream], None, "buffer_stage")
        buffer_update, buffer_from_stream = buffer_stage[7:]
        buffer_word = Signal(self.data_layout)
        m.d.sync += buffer_word.eq(exec_word)
        # Stage 3, the PEs' operand stage (READ_STAGE_LATENCY + PE_READ_LATENCY after issue). The bus drivers
        # are registers: the stream word and the vector and error buffers' words, each registered straight out
        # of its source (the buffers' output registers), and which of them each bus takes (0: the stream word,
        # 1: the vector buffer, 2: the error buffer). Row bus: x (forward MACs), x_s (UPDATE) or, for the GEMM,
        # W[:, p] from the owner PE's SRAM output register; column bus: e (backward MACs), e_s (UPDATE), B (GEMM).
        operand_stage = self._delay(m, buffer_stage[:7], None, "operand_stage")
        operand_op, operand_clear, operand_handoff, operand_kind, operand_owner, operand_write_back, \
            operand_addr = operand_stage
        stream_word = Signal(self.data_layout)
        vector_word = Signal(self.data_layout)
        error_word = Signal(self.data_layout)
        row_source = Signal(2)
        col_source = Signal(2)
        buffered = Mux(buffer_from_stream, 0, 1)  # the stream word in the first pass, else the vector buffer
        m.d.sync += [
            stream_word.eq(buffer_word),
            vector_word.eq(vector_read.data),
            error_word.eq(error_read.data),
            row_source.eq(Mux(buffer_update, 1, buffered)),
            col_source.eq(Mux(buffer_update, Mux(buffer_from_stream, 0, 2), buffered)),
        ]
        row_bus = [Signal(signed(self.acc_width), name=f"row_bus_{r}") for r in range(n_r)]
        col_bus = [Signal(signed(self.acc_width), name=f"col_bus_{c}") for c in range(n_r)]
        gemm_mac = (operand_op == MacOp.ROW_COL) & (operand_kind == CoreOp.GEMM)
        sources = (stream_word, vector_word, error_word)
        for index in range(n_r):
            owner_data = _select([pes[index][c].mem_data for c in range(n_r)], operand_owner)
            m.d.comb += [
                row_bus[index].eq(Mux(gemm_mac, owner_data, _select([word[index] for word in sources[:2]],
                                                                    row_source))),
                col_bus[index].eq(_select([word[index] for word in sources], col_source)),
            ]
        # Stage 5, the accumulate stage (EXECUTE_LATENCY after issue): a handoff starts the reduction.
        # With the interleaved accumulator the handoff lands accumulate_latency later.
        accumulate_handoff, accumulate_kind = self._delay(m, [operand_handoff, operand_kind], None, "accumulate_stage",
                                                          stages=PE_MAC_LATENCY + self.accumulate_latency)

        # ---- reduction engine (after the accumulate stage) ----
        red_active = Signal()
        red_kind = Signal(2)  # the CoreOp whose partial sums are being reduced or read out
        red_step = Signal(range(max(reduction_cycles, n_r) + 1))
        red_last = Mux(red_kind == CoreOp.GEMM, n_r - 1, reduction_cycles)
        with m.If(accumulate_handoff):
            m.d.sync += [red_active.eq(1), red_step.eq(0), red_kind.eq(accumulate_kind)]
        with m.Elif(red_active):
            m.d.sync += red_step.eq(red_step + 1)
            with m.If(red_step == red_last):
                m.d.sync += red_active.eq(0)
        reducing = red_active & (red_kind != CoreOp.GEMM) & (red_step < reduction_cycles)
        red_forward = red_kind == CoreOp.GEMV_FORWARD

        # ---- local memory writes: LOAD (the cycle after issue) and the UPDATE write-back ----
        # The write-back of a word runs update_write_back_stages stages after its last MAC's accumulate
        # stage (fixed: 2 P >> shift from the registered accumulator, then the rounding and the subtraction
        # from the weight, carried from the operand stage, then the saturation, whose result is written in that
        # cycle; fp16: the scaling, the 7-stage FP32 subtraction, the 2-stage rounding to FP16, the write). The
        # sequencer idles core_update_drain cycles after an UPDATE, so no LOAD write coincides and the next
        # command reads the new weights.
        write_back_flag, write_back_addr = self._delay(
            m, [operand_write_back, operand_addr], None, "write_back_stage",
            stages=PE_MAC_LATENCY + self.accumulate_latency + update_write_back_stages(self.params))
        write_back = Signal()  # in every PE: the write-back's subtraction (an energy event) and SRAM write
        m.d.comb += write_back.eq(write_back_flag)
        # Local reads only where the word is used, in the read stage, from registers: every PE in a GEMV MAC; in
        # a GEMM, the PEs of the PE column that broadcasts W[:, p]; in an UPDATE, once per weight word, with the
        # batch's last MAC (its word is the W of the write-back); none in a LOAD or a bubble.
        for r in range(n_r):
            for c in range(n_r):
                pe = pes[r][c]
                m.d.comb += [
                    pe.en.eq(1),
                    pe.rd_en.eq(exec_read[r][c]),
                    pe.rd_addr.eq(exec_addr),
                    pe.wr_en.eq(load_rows[r] | write_back),
                    pe.wr_addr.eq(Mux(write_back_flag, write_back_addr, load_addr)),
                    pe.wr_data.eq(Mux(write_back_flag,
                                      self._updated_weight(m, pe, None, write_back_shift, f"{r}_{c}"),
                                      load_word[c])),
                ]

        for r in range(n_r):
            for c in range(n_r):
                pe = pes[r][c]
                m.d.comb += [
                    pe.mac_op.eq(operand_op),
                    pe.mac_clear.eq(operand_clear),
                    pe.handoff.eq(operand_handoff),
                    pe.row_bus.eq(row_bus[r]),
                    pe.col_bus.eq(col_bus[c]),
                ]
                self._reduction_inputs(m, pes, r, c, reducing, red_forward, red_step)

        # ---- output stage ----
        # GEMV: the diagonal PEs send their sums after the reduction; GEMM: one row per read-out cycle.
        # The offer is held until the stage takes it (the pipeline is frozen meanwhile); it waits for a
        # needed i_data word too, as the pipeline advances only with both.
        reading_gemm = red_kind == CoreOp.GEMM
        if self.reduction_latency:
            # The interleaved reduction writes a block's sum into the diagonal PE's red reduction_latency cycles
            # after the last red_add: the output word copies red in the cycle after that write (the next
            # reduction's first result lands there from 2 cycles later on; gemv_block_gap keeps handoffs off
            # that write).
            reduced, = self._delay(m, [red_active & ~reading_gemm & (red_step == reduction_cycles)], None,
                                   "reduction_landing", stages=self.reduction_latency)
            gemv_output = Signal()
            m.d.comb += [
                gemv_output.eq(reduced),
                output_now.eq((red_active & reading_gemm) | gemv_output),
                output_fifo.w_en.eq(output_now),
            ]
            for lane in range(n_r):
                m.d.comb += output_fifo.w_data[lane * self.acc_width:(lane + 1) * self.acc_width].eq(
                    Mux(gemv_output, pes[lane][lane].red, _select([pes[r][lane].red for r in range(n_r)], red_step)))
            return m
        m.d.comb += [
            output_now.eq(red_active & (reading_gemm | (red_step == reduction_cycles))),
            output_fifo.w_en.eq(output_now),
        ]
        for lane in range(n_r):
            m.d.comb += output_fifo.w_data[lane * self.acc_width:(lane + 1) * self.acc_width].eq(
                Mux(reading_gemm, _select([pes[r][lane].red for r in range(n_r)], red_step), pes[lane][lane].red))
        return m

    def _avoid_landing_collisions(self, m, steps, gap):
        """``gap`` lengthened where the block period ``steps + gap`` would land a handoff in the cycle the
        interleaved reduction writes a block's sum (:func:`~trainforge.spec.caterpillar.gemv_landing_collisions`,
        a constant table indexed by the period; a period beyond it needs nothing)."""
        collisions = self.landing_collisions
        period = Signal(range(self.max_blocks + self.reduction_cycles + 2), name="gemv_period")
        m.d.comb += period.eq(steps + gap)
        bits = max(collisions).bit_length()
        extra = Cat(*(Const(count, bits) for count in collisions)).word_select(period, bits)
        if (1 << len(period)) > len(collisions):  # a period beyond the table needs nothing
            extra = Mux(period < len(collisions), extra, 0)
        return gap + extra

    def _range_checks(self, m, given):
        """Whether the command ``given`` has a field out of range, and the first such field's code.

        Comparisons with constants only (each range from
        :func:`~trainforge.spec.caterpillar.core_command_limits`; a bound the field's bits cannot pass is
        left out), and the UPDATE's batch products as ``mb > max_blocks // qb`` from a constant table indexed
        by ``qb``: no multiplier, a few LUT levels from the command payload to the registers loaded at
        acceptance.
        """
        limits = core_command_limits(self.params)

        def outside(value, name):
            low, high = limits[name]
            out = Const(0)
            if low > 0:
                out = out | (value < low)
            if high < (1 << len(value)) - 1:
                out = out | (value > high)
            return out

        op = given.op
        uses_qb = (op == CoreOp.GEMM) | (op == CoreOp.UPDATE)
        is_update = op == CoreOp.UPDATE
        qb_width = len(given.qb)
        batch_limit = Cat(*(Const(self.max_blocks // q if q else 0, qb_width)
                            for q in range(1 << qb_width))).word_select(given.qb, qb_width)
        checks = (  # in the order of core_command_checks: the first one out of range is reported
            (CommandField.OP, outside(op, "op")),
            (CommandField.MB, outside(given.mb, "mb")),
            (CommandField.NB, outside(given.nb, "nb")),
            (CommandField.QB, uses_qb & outside(given.qb, "qb")),
            (CommandField.BASE, outside(given.base, "base")),
            (CommandField.BATCH_MB, is_update & (given.mb > batch_limit)),
            (CommandField.BATCH_NB, is_update & (given.nb > batch_limit)),
        )
        rejected = Signal(name="command_rejected")
        field = Signal(CommandField, name="command_reject_field")
        code = Const(int(checks[-1][0]), 3)
        for name, bad in reversed(checks[:-1]):
            code = Mux(bad, int(name), code)
        m.d.comb += [rejected.eq(Cat(*(bad for _, bad in checks)).any()), field.eq(code)]
        return rejected, field

    @staticmethod
    def _delay(m, values, enable, name, stages=1):
        """Registered copies of ``values``, ``stages`` cycles later (one register per stage; advanced
        only when ``enable`` is high, every cycle if it is ``None``)."""
        delayed = list(values)
        for stage in range(stages):
            registers = [Signal.like(value, name=f"{name}_{stage}_{index}") for index, value in enumerate(delayed)]
            with m.If(1 if enable is None else enable):
                m.d.sync += [register.eq(value) for register, value in zip(registers, delayed)]
            delayed = registers
        return delayed

    def _updated_weight(self, m, pe, enable, shift, suffix):
        """The weight an UPDATE writes back, over three stages (``mac="fp16"``: :meth:`_updated_weight_fp16`, over
        :func:`~trainforge.spec.caterpillar.update_write_back_stages`):
        ``W - round(P / 2**shift)``, saturated.

        ``round(P / 2**s) = floor(P / 2**s + 1/2)`` is ``((2 P >> s) + 1) >> 1`` (arithmetic
        shifts, ``acc_width + 2`` bits, no overflow); the difference saturates to ``width`` bits.
        Stage 1 shifts the registered accumulator ``P``; stage 2 rounds and subtracts from ``W``,
        the word the PE's SRAM output register held in the last MAC's operand stage; stage 3
        saturates (the result is the SRAM's write data in that cycle).
        """
        # W, from the operand stage to the subtraction (stage 2 of the write-back).
        weight, = self._delay(m, [pe.mem_data], enable, f"update_weight_{suffix}",
                              stages=PE_MAC_LATENCY + self.accumulate_latency + 2)
        if self.mac == "fp16":
            return self._updated_weight_fp16(m, pe, weight, enable, shift, suffix)
        high, low = (1 << (self.width - 1)) - 1, -(1 << (self.width - 1))
        doubled = Cat(Const(0, 1), pe.acc).as_signed()  # 2 P, exact in acc_width + 1 bits
        shifted = Signal(signed(self.acc_width + 1), name=f"update_shifted_{suffix}")
        difference = Signal(signed(self.acc_width + 2), name=f"update_difference_{suffix}")
        updated = Signal(signed(self.width), name=f"update_weight_{suffix}")
        with m.If(1 if enable is None else enable):
            m.d.sync += [
                shifted.eq(doubled >> shift),
                difference.eq(weight - ((shifted + 1) >> 1)),
            ]
        m.d.comb += updated.eq(Mux(difference > high, high, Mux(difference < low, low, difference[:self.width])))
        return updated

    def _updated_weight_fp16(self, m, pe, weight, enable, shift, suffix):
        """The ``fp16`` write-back ``round16(W - P * 2**-shift)``
        (:func:`trainforge.golden.caterpillar.core_fp16.updated_weight`), over
        :func:`~trainforge.spec.caterpillar.update_write_back_stages` (11) stages.

        Stage 1 scales the registered FP32 accumulator ``P`` by ``2**-shift`` (its exponent minus ``shift``,
        flushed below FP32's normals) into a register; stages 2 to 8 widen the FP16 weight ``W`` to FP32 and add
        the negated scaled sum in the pipelined FP32 adder of the adder trees
        (:data:`~trainforge.spec.caterpillar.UPDATE_SUBTRACT_STAGES_FP16` = 7 stages, one adder step each, the
        last holding the difference; one rounding); stages 9 and 10 round that difference to FP16 (nearest even,
        flushed below ``2**-14``; :func:`~trainforge.hw.fp.convert.fp32_to_fp16_pipelined`,
        :data:`~trainforge.spec.caterpillar.UPDATE_ROUND_STAGES_FP16` = 2: stage 9 registers the rounded
        significand and the exponent field and range checks for both outcomes of its carry, stage 10 selects
        them by the carry) into a register, the SRAM's write data in stage 11 (so no path runs from the rounding
        to the DP16KD's data input). ``W`` enters the adder in stage 2, as in the fixed write-back's subtraction, so
        it is delayed as there.
        """
        scaled = Signal(32, name=f"update_scaled_{suffix}")
        updated = Signal(signed(self.width), name=f"update_weight_{suffix}")
        next_scaled = fp32_scale_down(m, pe.acc.as_unsigned(), shift, f"update_scale_{suffix}")
        widened = fp16_to_fp32(m, weight.as_unsigned(), f"update_widened_{suffix}")
        active = 1 if enable is None else enable
        difference = fp32_add(m, widened, scaled ^ (1 << 31), stages=UPDATE_SUBTRACT_STAGES_FP16, enable=active,
                              name=f"update_subtract_{suffix}")
        with m.If(active):
            m.d.sync += scaled.eq(next_scaled)
        rounded = fp32_to_fp16_pipelined(m, difference, enable=active, name=f"update_rounded_{suffix}",
                                         register_result=False)
        with m.If(active):
            m.d.sync += updated.eq(rounded)
        return updated

    def _reduction_buses(self, m, pes, red_step):
        """The column and row reduction buses (``bus`` reduction), built once: at step ``s`` column ``c``'s bus
        carries the partial sum of PE ``((c + 1 + s) % n_r, c)``, row ``r``'s that of PE ``(r, (r + 1 + s) % n_r)``."""
        if self._buses is None:
            n_r = self.n_r
            columns = [Signal(signed(self.acc_width), name=f"column_reduction_bus_{c}") for c in range(n_r)]
            rows = [Signal(signed(self.acc_width), name=f"row_reduction_bus_{r}") for r in range(n_r)]
            for line in range(n_r):
                m.d.comb += [
                    columns[line].eq(self._bus_sender(red_step, [pes[k][line].red for k in range(n_r)], line)),
                    rows[line].eq(self._bus_sender(red_step, [pes[line][k].red for k in range(n_r)], line)),
                ]
            self._buses = (columns, rows)
        return self._buses

    def _bus_sender(self, red_step, reds, diagonal):
        """The partial sum on a bus at reduction step ``s``: PE ``(diagonal + 1 + s) % n_r`` of the line sends."""
        return _select([reds[(diagonal + 1 + s) % self.n_r] for s in range(self.n_r - 1)], red_step)

    def _reduction_inputs(self, m, pes, r, c, reducing, red_forward, red_step):
        """``red_add`` and ``red_in`` of PE ``(r, c)`` for both directions and both reduction kinds."""
        n_r, pe = self.n_r, pes[r][c]
        if self.reduction == "bus":
            # Only the diagonal PE adds: a partial sum of its column (forward) or row (backward), sent in turn
            # by the other PEs of that line on the line's reduction bus. The bus reaches every PE of the line
            # (each PE's red_in is its column's bus forward, its row's backward), but only the diagonal's
            # red_add is raised. (A red_in tied to zero would leave the FP adder of an off-diagonal PE with a
            # constant operand, whose constant comparisons Verilator refuses.)
            buses = self._reduction_buses(m, pes, red_step)
            m.d.comb += pe.red_in.eq(Mux(red_forward, buses[0][c], buses[1][r]))
            if r == c:
                m.d.comb += pe.red_add.eq(reducing)
            return
        # Tree over the line, rotated so that the diagonal PE is position 0: at step s the PE at
        # position d (a multiple of 2^(s+1)) adds the partial sum of position d + 2^s.
        forward_position = (r - c) % n_r
        backward_position = (c - r) % n_r
        steps = range(self.reduction_cycles)

        def adds_at(position, s):
            return position % (2 << s) == 0 and position + (1 << s) < n_r

        # Which steps this PE adds at, as a constant bit mask indexed by the step.
        forward_mask = Const(sum(adds_at(forward_position, s) << s for s in steps), self.reduction_cycles)
        backward_mask = Const(sum(adds_at(backward_position, s) << s for s in steps), self.reduction_cycles)
        add = Signal(name=f"tree_add_{r}_{c}")
        source = Signal(signed(self.acc_width), name=f"tree_in_{r}_{c}")
        m.d.comb += [
            add.eq(Mux(red_forward, forward_mask.bit_select(red_step, 1), backward_mask.bit_select(red_step, 1))),
            source.eq(Mux(red_forward, _select([pes[(r + (1 << s)) % n_r][c].red for s in steps], red_step),
                          _select([pes[r][(c + (1 << s)) % n_r].red for s in steps], red_step))),
            pe.red_add.eq(reducing & add),
            pe.red_in.eq(source),
        ]


def _select(values, index):
    """``values[index]`` of equally shaped signed values, as one continuous assignment (a shift).

    An ``index`` past the end gives zero; callers only use the value when the index is in range.
    """
    width = len(values[0])
    return Cat(*values).word_select(index, width).as_signed()

