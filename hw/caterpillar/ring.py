"""Ring of CATERPILLAR cores (Fig. 3(a)): ``cp_core`` instances on a unidirectional systolic ring."""
from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.caterpillar import (COLLECTIVE_LANDING_LATENCY, CORE_PARAMS, RING_PARAMS, RING_READ_LATENCY, CoreOp, RingField,
                                 RingOp, ring_buffer_depth,
                                 ring_cmd_layout, ring_command_limits, ring_error_layout, ring_word_layout)
from ..fp.add import fp32_add
from ..stream_stage import StreamStage
from .core import CPCore

__all__ = ["RingOp", "CPRing"]


class CPRing(wiring.Component):
    """``cores`` linear algebra cores (``cp_core``) on a unidirectional systolic ring.

    Core ``k`` sends to core ``(k + 1) % cores`` through one register stage
    per hop, ``n_r`` words of ``acc_width`` bits per cycle. Each core has a
    ring buffer (``cores * max_blocks`` words of ``n_r`` lanes) holding its
    slice or copy of a vector; the ring's sequencer runs one command at a time
    (the next is accepted the cycle after the last result word has left):

    - ``WRITE`` / ``READ`` (``words``): load / unload ``words`` buffer words per
      core, core 0 first, over ``i_data`` / ``o_data``. A word read for ``o_data``
      (``READ``, the backward read-out) crosses the buffer's read register and a
      read-out register right behind that buffer (``RING_READ_LATENCY``), then the
      output stage.
    - ``ALL_GATHER`` / ``REDUCE_SCATTER`` (``words`` = chunk words ``cw``):
      ``cores - 1`` steps. In step ``s`` every core ``k`` reads ``cw`` words of
      chunk ``(k - s) % cores`` (all-gather) or ``(k - s - 1) % cores``
      (reduce-scatter), one per cycle; the read register of its buffer is the
      hop, and the next core writes the word (reduce-scatter: adds its own
      word of the same chunk, read in the same cycle as the sender's) one
      cycle later, at the same address; the next step starts after the last
      word has landed: ``(cores - 1) * (cw + 1)`` cycles.
    - ``GEMV_FORWARD`` (``mb``, ``nb``, ``base``, ``overlap``), Fig. 4(a, c) on all
      ``P = cores`` cores: core ``k`` holds row panel ``k`` of ``mb`` blocks at
      ``base`` and reads its part of ``x`` from its ring buffer words
      ``k * mb ..``; the command travels the ring, one hop (a shared stream
      stage) per core, so core ``k`` starts ``k`` cycles after core 0. Each core
      reduces internally; the partial outputs are summed by a chain of adds:
      core 0's word crosses a hop to core 1's adder, which adds core 1's word
      of the same block (produced in that same cycle) and passes the sum over
      the next hop, up to core ``P - 1``, whose sum leaves on ``o_data``.
    - ``GEMV_BACKWARD``, Fig. 4(b, d) on all cores: ``e`` (``nb`` words on
      ``i_data``) goes to core 0 and along the ring, one hop per core; each
      core runs the backward GEMV on its panel; core ``k``'s output words are
      written into its ring buffer words ``k * mb ..`` (its chunk ``k``) as they
      leave the core and are read out onto ``o_data`` block-major (word ``b``
      of cores ``0 .. P - 1``, then ``b + 1``), one per cycle, the cycle after
      their landing at the earliest.
    - ``LOAD`` (``core``, ``mb``, ``nb``, ``base``): the core's LOAD command and
      its ``i_data`` words, passed to core ``core``.

    Without stalls the cycles are :func:`trainforge.golden.caterpillar.ring.ring_schedule`.

    Out-of-range commands (:func:`~trainforge.spec.caterpillar.ring_command_limits`: ``op`` a
    :class:`RingOp`; LOAD's ``core`` below ``cores``; the ``mb``, ``nb`` and ``base`` it forwards to the cores
    within the core's ranges; ``words`` in ``1 .. cores * max_blocks``, for a collective ``1 .. max_blocks``)
    are rejected as by ``cp_core``: compared with constants when the command is accepted, not executed (no
    ``i_data`` word taken, no buffer written, nothing sent to a core), an error word (``field``, a
    :class:`~trainforge.spec.caterpillar.RingField`, and ``op``) handed to the ``o_error`` stage the cycle
    after acceptance, the next command accepted one cycle later. The cores never receive an out-of-range
    command, so their own ``o_error`` streams stay empty.

    Parameters
    ----------
    cores : int
        Cores on the ring (``2 x C``, 2..8; the GEMV spans all of them).
    n_r, width, acc_width, sram_depth, max_blocks, reduction, mac :
        Core parameters (:class:`~trainforge.hw.caterpillar.core.CPCore`).

    Members
    -------
    i_cmd : In(stream.Signature(cmd_layout))
    i_data : In(stream.Signature(word_layout))
        Vector words (``WRITE``), the core's operand words (``LOAD``, ``GEMV_BACKWARD``: the low
        ``width`` bits of each lane).
    o_data : Out(stream.Signature(word_layout))
    o_error : Out(stream.Signature(error_layout))
        One word per rejected command: ``field`` (a :class:`~trainforge.spec.caterpillar.RingField`), ``op``.

    Attributes
    ----------
    cmd_layout : data.StructLayout
        ``op`` (a :class:`RingOp`), ``core``, ``overlap``, ``mb``, ``nb``, ``base``, ``words`` (counts at least 1).
    word_layout : data.ArrayLayout
        ``n_r`` lanes of ``acc_width`` bits.
    buffer_depth : int
    """

    PARAMS = RING_PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        # The ring's cores keep the core parameters the ring does not have at their defaults (partial_sums and
        # reduction_partials 1: the ring's schedule follows the core's one-cycle adds).
        self.core_params = {name: self.params[name] for name in CORE_PARAMS.names if name in self.params}
        self.buffer_depth = ring_buffer_depth(self.params)
        self.buffer_addr_width = max(1, (self.buffer_depth - 1).bit_length())
        self.cmd_layout = ring_cmd_layout(self.params)
        self.word_layout = ring_word_layout(self.params)
        self.error_layout = ring_error_layout(self.params)
        super().__init__({
            "i_cmd": In(stream.Signature(self.cmd_layout)),
            "i_data": In(stream.Signature(self.word_layout)),
            "o_data": Out(stream.Signature(self.word_layout)),
            "o_error": Out(stream.Signature(self.error_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        cores, n_r = self.cores, self.n_r
        core_units = []
        for k in range(cores):
            m.submodules[f"core_{k}"] = unit = CPCore(**self.core_params)
            core_units.append(unit)
        buffers, senders, owns, landings = [], [], [], []
        for k in range(cores):
            m.submodules[f"ring_buffer_{k}"] = buffer = memory.Memory(
                shape=self.word_layout, depth=self.buffer_depth, init=[])
            buffers.append(buffer)
            senders.append(buffer.read_port())  # sent words, READ words, GEMV x
            owns.append(buffer.read_port())  # the core's own word added in a reduce-scatter
            landings.append(buffer.write_port())

        # Every result word (READ, GEMV) leaves through the shared output stage; ``result`` is its input.
        m.submodules.output_stage = output_stage = StreamStage(self.word_layout)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_data))
        result = output_stage.i_stream

        # ---- command register and flags ----
        cmd = Signal(self.cmd_layout)
        busy = Signal()
        op = cmd.op
        is_forward = op == RingOp.GEMV_FORWARD
        is_backward = op == RingOp.GEMV_BACKWARD
        is_gemv = is_forward | is_backward
        is_load = op == RingOp.LOAD
        is_write = op == RingOp.WRITE
        is_read = op == RingOp.READ
        is_gather = op == RingOp.ALL_GATHER
        is_scatter = op == RingOp.REDUCE_SCATTER
        is_collective = is_gather | is_scatter
        accept = self.i_cmd.valid & self.i_cmd.ready
        # Range checks of the offered command, registered at acceptance; a rejected command leaves busy low.
        rejected, reject_field = self._range_checks(m, self.i_cmd.payload)
        error_pending = Signal()
        error_word = Signal(self.error_layout)
        m.submodules.error_stage = error_stage = StreamStage(self.error_layout)
        wiring.connect(m, error_stage.o_stream, wiring.flipped(self.o_error))
        m.d.comb += [error_stage.i_stream.valid.eq(error_pending), error_stage.i_stream.payload.eq(error_word)]
        with m.If(error_stage.i_stream.ready):
            m.d.sync += error_pending.eq(0)
        m.d.comb += self.i_cmd.ready.eq(~busy & ~error_pending)
        with m.If(accept):
            m.d.sync += [cmd.eq(self.i_cmd.payload), busy.eq(~rejected), error_pending.eq(rejected),
                         error_word.field.eq(reject_field), error_word.op.eq(self.i_cmd.payload.op)]
        for unit in core_units:
            m.d.comb += unit.o_error.ready.eq(1)  # never valid: the ring forwards no out-of-range field
        out_transfer = result.valid & result.ready
        in_transfer = self.i_data.valid & self.i_data.ready
        words = cmd.words

        # ---- commands to the cores: core 0 (or the LOAD target) first; a GEMV travels the ring core to core ----
        sent = Signal()  # the command has been given to its first core
        core_op = Mux(is_forward, CoreOp.GEMV_FORWARD, Mux(is_backward, CoreOp.GEMV_BACKWARD, CoreOp.LOAD))
        core_command = Signal(core_units[0].cmd_layout)
        m.d.comb += [
            core_command.op.eq(core_op),
            core_command.overlap.eq(cmd.overlap),
            core_command.mb.eq(cmd.mb),
            core_command.nb.eq(cmd.nb),
            core_command.qb.eq(1),
            core_command.base.eq(cmd.base),
        ]
        # GEMV: core k takes the command from command hop k (a shared stream stage; core 0 from the ring's
        # command register) in the same cycle as hop k + 1 does, so core k + 1 gets it one cycle later at the
        # earliest. Every hop's ready is a register.
        command_hops = [None] + [StreamStage(core_units[k].cmd_layout) for k in range(1, cores)]
        for k in range(1, cores):
            m.submodules[f"command_hop_{k}"] = command_hops[k]
        gemv_offer = busy & is_gemv & ~sent
        for k, unit in enumerate(core_units):
            onward_ready = command_hops[k + 1].i_stream.ready if k + 1 < cores else Const(1)
            if k == 0:
                hop_valid, hop_payload = gemv_offer, core_command.as_value()
            else:
                hop_valid, hop_payload = command_hops[k].o_stream.valid, command_hops[k].o_stream.payload.as_value()
                m.d.comb += command_hops[k].o_stream.ready.eq(unit.i_cmd.ready & onward_ready)
            if k + 1 < cores:
                m.d.comb += [command_hops[k + 1].i_stream.valid.eq(hop_valid & unit.i_cmd.ready),
                             command_hops[k + 1].i_stream.payload.eq(hop_payload)]
            load_here = busy & is_load & (cmd.core == k) & ~sent
            m.d.comb += [unit.i_cmd.valid.eq(load_here | (hop_valid & onward_ready)),
                         unit.i_cmd.payload.eq(Mux(hop_valid, hop_payload, core_command.as_value()))]
        first_given = Signal()
        m.d.comb += first_given.eq(
            _bit([unit.i_cmd.valid & unit.i_cmd.ready for unit in core_units], Mux(is_load, cmd.core, 0)) & ~sent
            & (is_gemv | is_load) & busy)
        with m.If(first_given):
            m.d.sync += sent.eq(1)
        load_target_idle = _bit([unit.i_cmd.ready for unit in core_units], cmd.core)
        with m.If(busy & is_load & sent & load_target_idle):
            m.d.sync += busy.eq(0)

        # ---- GEMV forward: each core's part of x from its ring buffer (chunk k: words k * mb ..) ----
        feed_valid = [Signal(name=f"feed_valid_{k}") for k in range(cores)]
        feed_active = [Signal(name=f"feed_active_{k}") for k in range(cores)]
        feed_word = [Signal(range(self.max_blocks + 1), name=f"feed_word_{k}") for k in range(cores)]
        feed_advance = [Signal(name=f"feed_advance_{k}") for k in range(cores)]
        feed_addr = [Signal(self.buffer_addr_width, name=f"feed_addr_{k}") for k in range(cores)]
        chunk_start = [Signal(self.buffer_addr_width, name=f"chunk_start_{k}") for k in range(cores)]
        # Each core's x words cross a shared stream stage (``feed_stage_k``) between the buffer's read register
        # and the core, so no path runs from a ring buffer's read port into a core (nor from a core's
        # ``i_data.ready`` to a buffer's read enable). The words wait in the stage (two words) and the read
        # register until the core reads them, so a feed may start before its core takes the command: core 0's
        # first read is issued in the ring's acceptance cycle, every other core's in the cycle after it
        # (``feed_go``, a register), never later than core k - 1 takes the command (unstalled: core 1 then,
        # core k >= 2 earlier). The read address is a register, ``feed_addr_k``: the next word of chunk k,
        # loaded at acceptance (core 0's is 0 while its feed is idle) and counted up by each read. So no path
        # runs from a core's command handshake, the acceptance or the range checks into a buffer's address.
        feed_stages = [StreamStage(core_units[k].data_layout) for k in range(cores)]
        forward_accepted = accept & (self.i_cmd.payload.op == RingOp.GEMV_FORWARD) & ~rejected
        feed_go = Signal()  # the cycle after a GEMV forward's acceptance: cores 1 .. P - 1 issue their first read
        m.d.sync += feed_go.eq(forward_accepted)
        for k in range(cores):
            unit = core_units[k]
            m.submodules[f"feed_stage_{k}"] = feed_stages[k]
            with m.If(accept):  # core k's chunk of a GEMV (x forward, d backward), registered with the command
                m.d.sync += chunk_start[k].eq(k * self.i_cmd.payload.mb)
            start = forward_accepted if k == 0 else feed_go
            # ``cmd.mb`` is read from the cycle after the first fetch (core 0's is in the acceptance cycle)
            fetch = start | (feed_active[k] & (feed_word[k] != cmd.mb))
            m.d.comb += [
                feed_advance[k].eq(~feed_valid[k] | feed_stages[k].i_stream.ready),
                feed_stages[k].i_stream.valid.eq(feed_valid[k]),
                feed_stages[k].i_stream.payload.eq(_operands(senders[k].data, n_r, self.width)),
                feed_stages[k].o_stream.ready.eq(busy & is_forward & unit.i_data.ready),
            ]
            with m.If(feed_advance[k]):
                m.d.sync += feed_valid[k].eq(fetch)
                with m.If(fetch):
                    m.d.sync += [feed_word[k].eq(Mux(start, 1, feed_word[k] + 1)), feed_addr[k].eq(feed_addr[k] + 1)]
            if k == 0:  # chunk 0 starts at word 0: the address returns to 0 when the feed is idle
                with m.If(~feed_active[k] & ~start):
                    m.d.sync += feed_addr[k].eq(0)
            else:  # loaded at acceptance; the first read is the cycle after
                with m.If(accept):
                    m.d.sync += feed_addr[k].eq(k * self.i_cmd.payload.mb)
            with m.If(start):
                m.d.sync += feed_active[k].eq(1)
            with m.Elif(feed_advance[k] & (feed_word[k] == cmd.mb)):
                m.d.sync += feed_active[k].eq(0)

        # ---- GEMV backward: e to core 0 and along the ring, one hop (a shared stream stage) per core ----
        # Core k takes each e word in the same cycle as hop k + 1 does, so core k + 1 gets it a cycle later.
        e_hops = [None] + [StreamStage(core_units[k].data_layout) for k in range(1, cores)]
        for k in range(1, cores):
            m.submodules[f"e_hop_{k}"] = e_hops[k]
        e_valid, e_word = [], []
        for k, unit in enumerate(core_units):
            onward_ready = e_hops[k + 1].i_stream.ready if k + 1 < cores else Const(1)
            if k == 0:
                hop_valid = busy & is_backward & self.i_data.valid
                hop_payload = _operands(self.i_data.payload, n_r, self.width)
            else:
                hop_valid, hop_payload = e_hops[k].o_stream.valid, e_hops[k].o_stream.payload.as_value()
                m.d.comb += e_hops[k].o_stream.ready.eq(busy & is_backward & unit.i_data.ready & onward_ready)
            if k + 1 < cores:
                m.d.comb += [e_hops[k + 1].i_stream.valid.eq(hop_valid & unit.i_data.ready),
                             e_hops[k + 1].i_stream.payload.eq(hop_payload)]
            e_valid.append(hop_valid & onward_ready)
            e_word.append(hop_payload)

        for k, unit in enumerate(core_units):
            valid = Mux(is_forward, feed_stages[k].o_stream.valid,
                        Mux(is_backward, e_valid[k], is_load & self.i_data.valid & (cmd.core == k)))
            payload = Mux(is_forward, feed_stages[k].o_stream.payload.as_value(),
                          Mux(is_backward, e_word[k], _operands(self.i_data.payload, n_r, self.width)))
            m.d.comb += [unit.i_data.valid.eq(busy & valid), unit.i_data.payload.eq(payload)]

        # ---- GEMV forward outputs: a chain of adds along the ring ----
        # Core 0's word crosses sum hop 1 (a shared stream stage) and meets core 1's word in core 1's adder;
        # the sum crosses hop 2 to core 2's adder, and so on; core P - 1's sum is the result.
        sum_hops = [None] + [StreamStage(self.word_layout) for _ in range(1, cores)]
        for k in range(1, cores):
            m.submodules[f"sum_hop_{k}"] = sum_hops[k]
        for k, unit in enumerate(core_units):
            onward_ready = sum_hops[k + 1].i_stream.ready if k + 1 < cores else result.ready
            if k == 0:
                running_valid, running = unit.o_data.valid, unit.o_data.payload.as_value()
                upstream_valid = Const(1)
            else:
                upstream_valid = sum_hops[k].o_stream.valid
                running_valid = upstream_valid & unit.o_data.valid
                running = Signal(self.word_layout, name=f"running_sum_{k}")
                for lane in range(n_r):
                    m.d.comb += running[lane].eq(self._add(m, sum_hops[k].o_stream.payload[lane],
                                                           unit.o_data.payload[lane], f"chain_add_{k}_{lane}"))
                m.d.comb += sum_hops[k].o_stream.ready.eq(is_forward & unit.o_data.valid & onward_ready)
            if k + 1 < cores:
                m.d.comb += [sum_hops[k + 1].i_stream.valid.eq(is_forward & running_valid),
                             sum_hops[k + 1].i_stream.payload.eq(running)]
            # Backward: every output word lands in the core's ring buffer as it leaves the core.
            m.d.comb += unit.o_data.ready.eq(Mux(is_forward, upstream_valid & onward_ready, busy & is_backward))
        forward_valid, forward_sum = running_valid, running

        # ---- GEMV backward outputs: core k's words into its chunk k, read out block-major ----
        landed = [Signal(range(self.max_blocks + 1), name=f"landed_{k}") for k in range(cores)]
        for k, unit in enumerate(core_units):
            with m.If(busy & is_backward & unit.o_data.valid):
                m.d.sync += landed[k].eq(landed[k] + 1)

        # ---- WRITE: i_data into the buffers, core-major ----
        io_word = Signal(range(self.buffer_depth + 1))  # READ, WRITE: the word; backward read-out: the block
        io_core = Signal(range(cores))
        io_last = (io_word == words - 1) & (io_core == cores - 1)
        with m.If(in_transfer & is_write):
            m.d.sync += io_word.eq(io_word + 1)
            with m.If(io_word == words - 1):
                m.d.sync += [io_word.eq(0), io_core.eq(io_core + 1)]
            with m.If(io_last):
                m.d.sync += busy.eq(0)

        # ---- READ (core-major) and the backward read-out (block-major): the buffers onto o_data ----
        # Two registers between a read and the output stage (RING_READ_LATENCY): the buffer's read register, then
        # a read-out register right behind each buffer, loaded from the read port's data with no logic between,
        # so the word selection across the cores starts at a register next to each buffer. Both stages take one
        # enable (``read_advance``: they move together, or hold together while the output stage is full).
        assert RING_READ_LATENCY == 2, "the read-out below is the buffers' read registers and one register each"
        read_valid = Signal()
        read_core = Signal(range(cores))  # the core whose word is in the read registers
        read_out_valid = Signal()
        read_out_core = Signal(range(cores))  # the core whose word is in the read-out registers
        read_out = [Signal(self.word_layout, name=f"read_out_{k}", reset_less=True) for k in range(cores)]
        read_done = Signal()  # every word has been read
        read_advance = ~read_out_valid | result.ready
        landed_here = Signal(range(self.max_blocks + 1))
        m.d.comb += landed_here.eq(_word(landed, io_core))
        read_fetch = busy & ~read_done & (is_read | (is_backward & (landed_here > io_word)))
        with m.If(read_advance):
            m.d.sync += [read_valid.eq(read_fetch), read_core.eq(io_core),
                         read_out_valid.eq(read_valid), read_out_core.eq(read_core)]
            with m.If(read_valid):
                m.d.sync += [read_out[k].eq(senders[k].data) for k in range(cores)]
            with m.If(read_fetch & is_read):
                m.d.sync += io_word.eq(io_word + 1)
                with m.If(io_word == words - 1):
                    m.d.sync += [io_word.eq(0), io_core.eq(io_core + 1)]
                with m.If(io_last):
                    m.d.sync += read_done.eq(1)
            with m.If(read_fetch & is_backward):
                m.d.sync += io_core.eq(io_core + 1)
                with m.If(io_core == cores - 1):
                    m.d.sync += [io_core.eq(0), io_word.eq(io_word + 1)]
                    with m.If(io_word == cmd.mb - 1):
                        m.d.sync += read_done.eq(1)

        # ---- result counting for GEMV and READ ----
        out_count = Signal(range(cores * self.buffer_depth + 1))  # READ: up to every word of every buffer
        out_total = Mux(is_forward, cmd.nb, Mux(is_backward, cores * cmd.mb, cores * words))
        with m.If(out_transfer):
            m.d.sync += out_count.eq(out_count + 1)
            with m.If(out_count == out_total - 1):
                m.d.sync += busy.eq(0)

        read_word = Signal(self.word_layout)
        m.d.comb += read_word.eq(_word(read_out, read_out_core))
        from_buffers = is_read | is_backward
        m.d.comb += [
            result.valid.eq(busy & Mux(from_buffers, read_out_valid, is_forward & forward_valid)),
            result.payload.eq(Mux(from_buffers, read_word.as_value(), forward_sum.as_value())),
            self.i_data.ready.eq(busy & Mux(is_write, 1,
                                            Mux(is_backward, core_units[0].i_data.ready & e_hops[1].i_stream.ready,
                                                is_load & _bit([unit.i_data.ready for unit in core_units],
                                                               cmd.core)))),
        ]

        # ---- collectives: steps of cw words and one landing cycle (at least COLLECTIVE_LANDING_LATENCY + 1
        # cycles a step: the next step reads what this one lands) ----
        assert COLLECTIVE_LANDING_LATENCY == 2, "the landing below is the read register and one landing register"
        step = Signal(range(cores))
        word = Signal(range(max(self.max_blocks + COLLECTIVE_LANDING_LATENCY - 1, COLLECTIVE_LANDING_LATENCY) + 1))
        step_last_word = Signal.like(word)  # the last value of ``word`` in a step: max(cw, 2)
        with m.If(accept):
            m.d.sync += step_last_word.eq(Mux(self.i_cmd.payload.words < COLLECTIVE_LANDING_LATENCY,
                                              COLLECTIVE_LANDING_LATENCY, self.i_cmd.payload.words))
        sending = busy & is_collective & (word < words)
        # The last step lasts until its last word has landed (word = cw + 1): no landing after the command.
        last_step = step == cores - 2
        step_end = Mux(last_step, words + (COLLECTIVE_LANDING_LATENCY - 1), step_last_word)
        with m.If(busy & is_collective):
            with m.If(word == step_end):
                m.d.sync += word.eq(0)
                with m.If(step == cores - 2):
                    m.d.sync += busy.eq(0)
                with m.Else():
                    m.d.sync += step.eq(step + 1)
            with m.Else():
                m.d.sync += word.eq(word + 1)
        # Each core's send chunk base address: all-gather starts with its own chunk k,
        # reduce-scatter with chunk k - 1; one chunk back per step.
        chunk_base = [Signal(self.buffer_addr_width, name=f"chunk_base_{k}") for k in range(cores)]
        # A word read in cycle t is in the sender's read register in t + 1, in the receiver's landing registers
        # (with the receiver's own word) in t + 2, and written (a reduce-scatter: the registers' sum) in t + 2.
        read_valid_hop = Signal()
        land_valid = Signal()
        read_addr_hop = [Signal(self.buffer_addr_width, name=f"land_addr_hop_{k}") for k in range(cores)]
        land_addr = [Signal(self.buffer_addr_width, name=f"land_addr_{k}") for k in range(cores)]
        m.d.sync += [read_valid_hop.eq(sending), land_valid.eq(read_valid_hop)]
        payload = self.i_cmd.payload
        for k in range(cores):
            with m.If(accept):
                m.d.sync += chunk_base[k].eq(
                    Mux(payload.op == RingOp.ALL_GATHER, k, (k - 1) % cores) * payload.words)
            with m.Elif(busy & is_collective & (word == step_end)):
                m.d.sync += chunk_base[k].eq(Mux(chunk_base[k] == 0, (cores - 1) * words, chunk_base[k] - words))
            previous = (k - 1) % cores
            m.d.sync += [read_addr_hop[k].eq(chunk_base[previous] + word), land_addr[k].eq(read_addr_hop[k])]
            arriving = Signal(self.word_layout, name=f"landing_word_{k}", reset_less=True)
            own = Signal(self.word_layout, name=f"landing_own_{k}", reset_less=True)
            with m.If(read_valid_hop):  # the words of a collective's read in the cycle before
                m.d.sync += [arriving.eq(senders[previous].data), own.eq(owns[k].data)]
            scatter_sum = Signal(self.word_layout, name=f"scatter_sum_{k}")
            for lane in range(n_r):
                m.d.comb += scatter_sum[lane].eq(self._add(m, arriving[lane], own[lane], f"scatter_add_{k}_{lane}"))
            write_here = in_transfer & is_write & (io_core == k)
            backward_here = is_backward & core_units[k].o_data.valid
            # Core 0's first x word is read in the GEMV's acceptance cycle, while ``cmd`` still holds the previous
            # command (which no longer reads its buffers then): while the ring is idle its port 0 is the feed's.
            feeding = (is_forward | ~busy) if k == 0 else is_forward
            sender_addr = Mux(feeding, feed_addr[k],
                              Mux(is_collective, chunk_base[k] + word,
                                  Mux(is_backward, chunk_start[k] + io_word, io_word)))
            sender_en = Mux(feeding, feed_advance[k], Mux(is_collective, 1, read_advance))
            m.d.comb += [
                senders[k].addr.eq(sender_addr),
                senders[k].en.eq(sender_en),
                owns[k].addr.eq(chunk_base[previous] + word),
                owns[k].en.eq(1),
                landings[k].en.eq(busy & (write_here | (is_collective & land_valid) | backward_here)),
                landings[k].addr.eq(Mux(is_write, io_word,
                                        Mux(is_backward, chunk_start[k] + landed[k], land_addr[k]))),
                landings[k].data.eq(Mux(is_write, self.i_data.payload.as_value(),
                                        Mux(is_backward, core_units[k].o_data.payload.as_value(),
                                            Mux(is_scatter, scatter_sum.as_value(), arriving.as_value())))),
            ]

        # ---- per-command state back to idle ----
        with m.If(accept):
            m.d.sync += [sent.eq(0), io_word.eq(0), io_core.eq(0),
                         read_done.eq(0), out_count.eq(0), step.eq(0), word.eq(0)]
            m.d.sync += [counter.eq(0) for counter in landed]
        return m

    def _add(self, m, x, y, name):
        """One lane's sum in the ring's adders: wrapping ``acc_width``-bit (``fixed``), or one FP32 addition
        rounded to nearest even (``fp16``: the lanes are FP32 bit patterns, :func:`trainforge.hw.fp.add.fp32_add`)."""
        if self.mac == "fp16":
            return fp32_add(m, x.as_unsigned(), y.as_unsigned(), stages=0, name=name)
        return x + y

    def _range_checks(self, m, given):
        """Whether the ring command ``given`` has a field out of range, and the first such field's code
        (comparisons with constants of the parameters, in the order of ``ring_command_checks``)."""
        limits = ring_command_limits(self.params)

        def outside(value, name):
            low, high = limits[name]
            out = Const(0)
            if low > 0:
                out = out | (value < low)
            if high < (1 << len(value)) - 1:
                out = out | (value > high)
            return out

        op = given.op
        uses_blocks = (op == RingOp.GEMV_FORWARD) | (op == RingOp.GEMV_BACKWARD) | (op == RingOp.LOAD)
        collective = (op == RingOp.ALL_GATHER) | (op == RingOp.REDUCE_SCATTER)
        buffer_io = (op == RingOp.WRITE) | (op == RingOp.READ)
        checks = (
            (RingField.OP, outside(op, "op")),
            (RingField.CORE, (op == RingOp.LOAD) & outside(given.core, "core")),
            (RingField.MB, uses_blocks & outside(given.mb, "mb")),
            (RingField.NB, uses_blocks & outside(given.nb, "nb")),
            (RingField.BASE, uses_blocks & outside(given.base, "base")),
            (RingField.WORDS, (buffer_io & outside(given.words, "words"))
             | (collective & outside(given.words, "chunk words"))),
        )
        rejected = Signal(name="command_rejected")
        field = Signal(RingField, name="command_reject_field")
        code = Const(int(checks[-1][0]), 3)
        for name, bad in reversed(checks[:-1]):
            code = Mux(bad, int(name), code)
        m.d.comb += [rejected.eq(Cat(*(bad for _, bad in checks)).any()), field.eq(code)]
        return rejected, field


def _operands(word, n_r, width):
    """The low ``width`` bits of each lane of a ring word: a core's ``i_data`` payload (as bits)."""
    return Cat(*(word[lane][:width] for lane in range(n_r)))


def _bit(bits, index):
    """``bits[index]`` of a list of 1-bit values."""
    return Cat(*bits).bit_select(index, 1)


def _word(words, index):
    """``words[index]`` of equally shaped values, as bits (a shift; zero past the end)."""
    return Cat(*words).word_select(index, len(Cat(words[0])))

