"""Programmable processing element of NeuroTrainer (Section 3.3, Fig. 9, Table 4)."""
from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...spec.neurotrainer import pe as spec
from .comparator import NTComparator
from .mac import NTMAC
from .router import NTRouter
from ..synthesis import replica_attrs
from ...spec.neurotrainer.pe_program import PE_PROGRAM_LAYOUT, ROUTE_LOAD_STEPS, PEOp

__all__ = ["NTPE"]


class NTPE(wiring.Component):
    """A PE: k MACs, k comparators and three double-buffered local buffers, run by 4-byte programs.

    Buffers (``lib.memory.Memory``): BUF Input 1 (``in1_depth`` 32-bit words), BUF Input 2
    (``in2_depth`` rows of ``lanes`` 32-bit words) and BUF Output (``out_depth`` rows of
    ``lanes`` partial sums). Each input buffer is two halves (banks) filled in turn from its
    input stream, one word or row per transfer, a block closed by ``last``; a full half is not
    written again until a pass has released it.

    A *pass* runs one program word (:data:`~trainforge.spec.neurotrainer.pe_program.PE_PROGRAM_LAYOUT`).
    It starts when the program is offered, the PE is idle, and the half it reads of each buffer
    it uses (BUF Input 2 always, BUF Input 1 for MAC) holds a complete block. It then takes
    ``N = (cnt2_outer + 1) * (cnt2_inner + 1)`` steps, one per cycle: CNT2 sweeps the BUF1
    block, stored row-major as ``(cnt2_outer + 1) x (cnt2_inner + 1)``, by rows (address
    ``o * (cnt2_inner + 1) + i``), or with ``transpose`` by columns, which reads the block's
    transpose; CNT1 counts ``0 .. cnt1`` and is the BUF2 row address. An output row closes
    when CNT1 wraps or at the last step. MAC: ``y = a * x + y`` with ``a`` from BUF1 and ``x``
    the BUF2 row, starting each output row from 0, or with ``accumulate`` from its partial sum
    in BUF Output (one extra row ``a = 1.0, x = psum`` before the row's first step); results go
    to BUF Output row ``0, 1, ...`` of the pass and, with ``emit``, to ``o_result``. MAX: the k
    comparators take the low 16 bits of each lane of the BUF2 rows, one window per output row;
    with ``emit`` each lane's result word is ``value | index << 16``. MAX with ``transpose``
    (route, the max-pooling backward pass): the route unit
    (:class:`~trainforge.hw.neurotrainer.router.NTRouter`) takes each lane's argmax from the
    first step's BUF2 row and its dY from the second's, then every further step is an output
    row, one window position each: dY at the argmax, 0 elsewhere. MAX with ``accumulate``
    (product, the element-wise f'(x) dY): BUF2 rows in pairs, the first kept as each lane's own
    ``a``, the second the ``x`` of one MAC row from 0 (``y = a x`` lane by lane).

    After the last result has left, the pass releases its halves (unless ``hold1``/``hold2``)
    and the PE is idle again. See ``hw/neurotrainer/docs/pe.md`` for the exact timing.

    Parameters
    ----------
    lanes : int
        MACs and comparators k.
    in1_depth, in2_depth, out_depth : int
        Buffer depths (powers of two): words of BUF Input 1, rows of BUF Input 2 and BUF Output.
    frac_bits, frac_bits16, rounding, seed : int, int, str, int
        The MAC array's parameters (:class:`~trainforge.hw.neurotrainer.mac.NTMAC`).
    index_bits : int
        The comparators' argmax index width.

    Members
    -------
    i_program : In(stream.Signature(PE_PROGRAM_LAYOUT))
        Program words, one per pass.
    i_in1 : In(stream.Signature(in1_layout))
        BUF Input 1 fill stream: one 32-bit word per transfer.
    i_in2 : In(stream.Signature(in2_layout))
        BUF Input 2 fill stream: one row of ``lanes`` 32-bit words per transfer.
    o_result : Out(stream.Signature(result_layout))
        Results of the passes with ``emit``.

    Attributes
    ----------
    in1_layout : data.StructLayout
        ``data`` (32 bits), ``last`` (closes the block).
    in2_layout : data.StructLayout
        ``data`` (``lanes`` x 32 bits), ``last``.
    result_layout : data.StructLayout
        ``y`` (``lanes`` x 32 bits), ``last`` (the pass's last result).
    """

    PARAMS = spec.PARAMS

    #: Cycles from a row entering the MAC array / the comparators to its result.
    MAC_LATENCY = NTMAC.LATENCY
    MAX_LATENCY = NTComparator.LATENCY

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.in1_layout = data.StructLayout({"data": unsigned(32), "last": 1})
        self.in2_layout = data.StructLayout({"data": data.ArrayLayout(unsigned(32), self.lanes), "last": 1})
        self.result_layout = data.StructLayout({"y": data.ArrayLayout(unsigned(32), self.lanes), "last": 1})
        super().__init__({
            "i_program": In(stream.Signature(PE_PROGRAM_LAYOUT)),
            "i_in1": In(stream.Signature(self.in1_layout)),
            "i_in2": In(stream.Signature(self.in2_layout)),
            "o_result": Out(stream.Signature(self.result_layout)),
        })

    @staticmethod
    def _double_buffer(m, name, fill, write, half_bits, release):
        """Bank bookkeeping of one input buffer; returns ``(read_bank, read_bank_full)``.

        The writer fills bank ``write_bank`` from ``fill`` (address = word count in the block)
        until ``last``, marks it full and moves to the other bank; it stalls on a full bank.
        ``release`` empties the read bank and moves the reader to the other bank.
        """
        full = [Signal(name=f"{name}_full_{bank}") for bank in range(2)]
        write_bank = Signal(name=f"{name}_write_bank")
        read_bank = Signal(name=f"{name}_read_bank")
        count = Signal(half_bits, name=f"{name}_write_count")
        transfer = Signal(name=f"{name}_fill")
        m.d.comb += [
            fill.ready.eq(~Mux(write_bank, full[1], full[0])),
            transfer.eq(fill.valid & fill.ready),
            write.en.eq(transfer),
            write.addr.eq(Cat(count, write_bank)),
            write.data.eq(fill.payload.data),
        ]
        with m.If(release):
            m.d.sync += read_bank.eq(~read_bank)
            for bank in range(2):
                with m.If(read_bank == bank):
                    m.d.sync += full[bank].eq(0)
        with m.If(transfer):
            m.d.sync += count.eq(count + 1)
            with m.If(fill.payload.last):
                m.d.sync += [count.eq(0), write_bank.eq(~write_bank)]
                for bank in range(2):
                    with m.If(write_bank == bank):
                        m.d.sync += full[bank].eq(1)
        read_full = Signal(name=f"{name}_read_full")
        m.d.comb += read_full.eq(Mux(read_bank, full[1], full[0]))
        return read_bank, read_full

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        half1_bits = (self.in1_depth // 2).bit_length() - 1
        half2_bits = (self.in2_depth // 2).bit_length() - 1
        out_bits = self.out_depth.bit_length() - 1

        m.submodules.mac = mac = NTMAC(lanes=lanes, frac_bits=self.frac_bits, frac_bits16=self.frac_bits16,
                                       rounding=self.rounding, seed=self.seed, lane_operands=True)
        m.submodules.comparator = comparator = NTComparator(lanes=lanes, index_bits=self.index_bits)
        m.submodules.router = router = NTRouter(lanes=lanes, index_bits=self.index_bits)
        m.submodules.buffer_in1 = buffer_in1 = Memory(shape=unsigned(32), depth=self.in1_depth, init=[])
        m.submodules.buffer_in2 = buffer_in2 = Memory(shape=unsigned(32 * lanes), depth=self.in2_depth, init=[])
        m.submodules.buffer_out = buffer_out = Memory(shape=unsigned(32 * lanes), depth=self.out_depth, init=[])
        write1, read1 = buffer_in1.write_port(), buffer_in1.read_port()
        write2, read2 = buffer_in2.write_port(), buffer_in2.read_port()
        write_out, read_out = buffer_out.write_port(), buffer_out.read_port()

        program = Signal(PE_PROGRAM_LAYOUT)
        running = Signal()      # issuing the steps of a pass
        draining = Signal()     # every step issued, results still in flight
        pending = Signal(4)     # output rows issued and not yet delivered
        release1 = Signal()
        release2 = Signal()
        bank1, bank1_full = self._double_buffer(m, "in1", self.i_in1, write1, half1_bits, release1)
        bank2, bank2_full = self._double_buffer(m, "in2", self.i_in2, write2, half2_bits, release2)

        # Accepting a program: idle, and the halves it reads hold complete blocks.
        offered = self.i_program.payload
        accept = Signal()
        m.d.comb += [
            self.i_program.ready.eq(~running & ~draining & bank2_full & (offered.op | bank1_full)),
            accept.eq(self.i_program.valid & self.i_program.ready),
        ]

        # CNT2 (BUF1): outer/inner level counters and an incremental 16-bit address.
        outer = Signal(8)
        inner = Signal(8)
        address1 = Signal(16)
        line1 = Signal(16)
        outer_max = Signal(8)
        inner_max = Signal(8)
        outer_stride = Signal(16)
        inner_stride = Signal(16)
        row_length = Signal(9)
        m.d.comb += [
            row_length.eq(program.cnt2_inner + 1),
            outer_max.eq(Mux(program.transpose, program.cnt2_inner, program.cnt2_outer)),
            inner_max.eq(Mux(program.transpose, program.cnt2_outer, program.cnt2_inner)),
            outer_stride.eq(Mux(program.transpose, 1, row_length)),
            inner_stride.eq(Mux(program.transpose, row_length, 1)),
        ]
        # CNT1 (BUF2) and the output-row counters of BUF Output.
        count1 = Signal(8)
        address2 = Signal(16)
        out_row = Signal(out_bits)
        out_write = Signal(out_bits)
        preloaded = Signal()

        last_step = Signal()
        closing = Signal()          # CNT1 wraps or the last step
        closes_row = Signal()       # the step closes an output row (route: every step after the loading ones)
        preload = Signal()
        route = Signal()
        route_step = Signal(2)      # route: 0 (argmax row), 1 (dY row), 2 (emitting)
        product = Signal()
        pair_odd = Signal()         # product: the second row of a pair (x), else the first (the lanes' a)
        use_mac = Signal()
        m.d.comb += [
            route.eq((program.op == PEOp.MAX) & program.transpose),
            product.eq((program.op == PEOp.MAX) & program.accumulate & ~program.transpose),
            use_mac.eq((program.op == PEOp.MAC) | product),
            last_step.eq((outer == outer_max) & (inner == inner_max)),
            closing.eq((count1 == program.cnt1) | last_step),
            closes_row.eq(Mux(route, route_step == ROUTE_LOAD_STEPS, Mux(product, pair_odd, closing))),
            preload.eq(program.accumulate & (program.op == PEOp.MAC) & (count1 == 0) & ~preloaded),
            address2.eq(count1),
        ]

        # Stage B: buffer data (read ports enabled on advance) and the row's flags.
        stage_valid = Signal()
        stage_preload = Signal()
        stage_clear = Signal()
        stage_first = Signal()
        stage_close = Signal()
        stage_phase = Signal(2)
        consumer_ready = Signal()
        advance = Signal()
        issue = Signal()
        # Stage C: the read data, registered as it leaves the block RAMs (their outputs are slow:
        # nothing between a RAM and its register), with the multiplexers' selects; the preload and
        # product multiplexers come after the registers, and the consumers take their rows from there.
        row_valid = Signal()
        row_clear = Signal()
        row_first = Signal()
        row_close = Signal()
        row_phase = Signal(2)
        row_preload = Signal()      # the row is a preload (a = 1.0, x = the partial sums)
        row_a_kept = Signal()       # product: a is the pair's first row (kept), not the BUF1 word
        row_word = Signal(32)       # BUF Input 1's word
        row_in2 = [Signal(32, name=f"row_in2_{lane}") for lane in range(lanes)]      # BUF Input 2's row
        row_psum = [Signal(32, name=f"row_psum_{lane}") for lane in range(lanes)]    # BUF Output's row
        row_kept = [Signal(32, name=f"row_kept_{lane}") for lane in range(lanes)]    # product: the pair's first row
        # The comparators' own copy of BUF Input 2's low halves (a replica, kept apart by the FPGA flow:
        # the running maximum is a one-cycle loop, and row_in2 also feeds the MAC array's DSP blocks).
        row_compare = [Signal(16, name=f"row_compare_{lane}", attrs=replica_attrs()) for lane in range(lanes)]
        row_a = [Signal(32, name=f"row_a_{lane}") for lane in range(lanes)]    # per lane: the product's operands
        row_x = [Signal(32, name=f"row_x_{lane}") for lane in range(lanes)]
        m.d.comb += [
            consumer_ready.eq(Mux(route, router.i_row.ready,
                                  Mux(use_mac, mac.i_row.ready | (product & ~row_phase[0]), comparator.i_row.ready))),
            advance.eq(~row_valid | consumer_ready),
            issue.eq(running & advance),
            read1.en.eq(advance),
            read2.en.eq(advance),
            read_out.en.eq(advance),
            read1.addr.eq(Cat(address1[:half1_bits], bank1)),
            read2.addr.eq(Cat(address2[:half2_bits], bank2)),
            read_out.addr.eq(out_row),
        ]
        with m.If(advance):
            m.d.sync += [
                stage_valid.eq(issue),
                stage_preload.eq(preload),
                stage_clear.eq(preload | product | ((count1 == 0) & ~program.accumulate)),
                stage_first.eq(count1 == 0),
                stage_close.eq(~preload & closes_row),
                stage_phase.eq(Mux(product, pair_odd, route_step)),
            ]

        with m.If(accept):
            m.d.sync += [
                program.eq(offered),
                running.eq(1),
                outer.eq(0), inner.eq(0), address1.eq(0), line1.eq(0),
                count1.eq(0), out_row.eq(0), out_write.eq(0), preloaded.eq(0), route_step.eq(0), pair_odd.eq(0),
            ]
        with m.Elif(issue & preload):
            m.d.sync += preloaded.eq(1)
        with m.Elif(issue):
            with m.If(route_step != ROUTE_LOAD_STEPS):
                m.d.sync += route_step.eq(route_step + 1)
            m.d.sync += pair_odd.eq(~pair_odd)
            with m.If(inner == inner_max):
                m.d.sync += [
                    inner.eq(0),
                    outer.eq(outer + 1),
                    line1.eq(line1 + outer_stride),
                    address1.eq(line1 + outer_stride),
                ]
            with m.Else():
                m.d.sync += [inner.eq(inner + 1), address1.eq(address1 + inner_stride)]
            with m.If(closing):
                m.d.sync += [count1.eq(0), out_row.eq(out_row + 1), preloaded.eq(0)]
            with m.Else():
                m.d.sync += count1.eq(count1 + 1)
            with m.If(last_step):
                m.d.sync += [running.eq(0), draining.eq(1)]

        # Stage C, then rows to the MAC array (MAC) or the comparators (MAX).
        one = Mux(program.wide, Const(1 << self.frac_bits, 32),
                  Const((1 << self.frac_bits16) | (1 << (self.frac_bits16 + 16)), 32))
        with m.If(advance):
            m.d.sync += [
                row_valid.eq(stage_valid),
                row_clear.eq(stage_clear),
                row_first.eq(stage_first),
                row_close.eq(stage_close),
                row_phase.eq(stage_phase),
                row_preload.eq(stage_preload),
                row_a_kept.eq(product & stage_phase[0]),
                row_word.eq(read1.data),
            ]
            for lane in range(lanes):
                m.d.sync += [
                    row_in2[lane].eq(read2.data[32 * lane:32 * lane + 32]),
                    row_psum[lane].eq(read_out.data[32 * lane:32 * lane + 32]),
                    row_compare[lane].eq(read2.data[32 * lane:32 * lane + 16]),
                    # A product's second row (x) enters stage C as its first row (the lanes' a) leaves it.
                    row_kept[lane].eq(row_x[lane]),
                ]
        for lane in range(lanes):
            m.d.comb += [
                row_x[lane].eq(Mux(row_preload, row_psum[lane], row_in2[lane])),
                row_a[lane].eq(Mux(row_a_kept, row_kept[lane], Mux(row_preload, one, row_word))),
            ]
        mac_row = mac.i_row.payload
        compare_row = comparator.i_row.payload
        # Product: the first row of each pair only becomes the second's a (above); the second goes to the MAC array.
        m.d.comb += [
            mac.i_row.valid.eq(row_valid & ((program.op == PEOp.MAC) | (product & row_phase[0]))),
            mac_row.wide.eq(program.wide),
            mac_row.sr.eq(program.sr),
            mac_row.clear.eq(row_clear),
            mac_row.read.eq(row_close),
            comparator.i_row.valid.eq(row_valid & program.op & ~program.transpose & ~program.accumulate),
            router.i_row.valid.eq(row_valid & route),
            router.i_row.payload.phase.eq(row_phase),
            compare_row.first.eq(row_first),
            compare_row.last.eq(row_close),
        ]
        for lane in range(lanes):
            m.d.comb += [
                mac_row.x[lane].eq(row_x[lane]),
                # No MAX pass preloads: the comparators and the route unit read BUF Input 2's register directly.
                compare_row.x[lane].eq(row_compare[lane]),
                router.i_row.payload.x[lane].eq(row_in2[lane]),
                mac_row.a_lanes[lane].eq(row_a[lane]),
            ]

        # Results: BUF Output (MAC) and o_result (with emit).
        mac_done = Signal()
        max_done = Signal()
        route_done = Signal()
        m.d.comb += [
            mac.o_y.ready.eq(~program.emit | self.o_result.ready),
            comparator.o_max.ready.eq(~program.emit | self.o_result.ready),
            mac_done.eq(mac.o_y.valid & mac.o_y.ready),
            router.o_row.ready.eq(~program.emit | self.o_result.ready),
            max_done.eq(comparator.o_max.valid & comparator.o_max.ready),
            route_done.eq(router.o_row.valid & router.o_row.ready),
            self.o_result.valid.eq(program.emit & Mux(route, router.o_row.valid,
                                                      Mux(use_mac, mac.o_y.valid, comparator.o_max.valid))),
            self.o_result.payload.last.eq(draining & (pending == 1)),
            write_out.en.eq(mac_done),
            write_out.addr.eq(out_write),
            write_out.data.eq(mac.o_y.payload),
        ]
        for lane in range(lanes):
            max_word = Cat(comparator.o_max.payload.value[lane], comparator.o_max.payload.index[lane].as_unsigned(),
                           Const(0, 16 - self.index_bits))
            m.d.comb += self.o_result.payload.y[lane].eq(Mux(route, router.o_row.payload[lane],
                                                             Mux(use_mac, mac.o_y.payload[lane], max_word)))
        with m.If(mac_done):
            m.d.sync += out_write.eq(out_write + 1)

        # Pass bookkeeping: results in flight, then release of the halves.
        delivered = mac_done | max_done | route_done
        m.d.sync += pending.eq(pending + (issue & ~preload & closes_row) - delivered)
        m.d.comb += [
            release1.eq(draining & (pending == 0) & (program.op == PEOp.MAC) & ~program.hold1),
            release2.eq(draining & (pending == 0) & ~program.hold2),
        ]
        with m.If(draining & (pending == 0)):
            m.d.sync += draining.eq(0)
        return m
