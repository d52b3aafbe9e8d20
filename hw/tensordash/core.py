"""The datapath shared by the TensorDash PE and tile: staging buffer, schedulers, sparse muxes, MACs.

The exact rules are those of the golden cycle model
:mod:`trainforge.golden.tensordash.core`; this module is their RTL.
"""
from amaranth import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import tensordash as spec
from ...spec.tensordash import lane_levels, option_slots
from ..stream_stage import StreamStage
from .mac import MAC_UNITS
from .scheduler import schedule_logic

__all__ = ["TDSparseCore"]


class TDSparseCore(wiring.Component):
    """``rows`` x ``cols`` PEs behind one staging buffer of ``2 * depth`` rows and ``rows`` schedulers.

    Staging buffer: rows enter ``depth`` at a time from ``i_group`` (one
    row-wide write port per buffer row, so a buffer drained in one cycle
    refills at once); a group is taken whenever at most ``depth`` rows remain
    after this cycle's advance. The first ``depth`` rows are the window the
    schedulers and muxes see. Per-value zero detectors on the B operands
    (and, in ``"both"`` mode, on the A operands) give the effectual bits;
    a ``consumed`` bit per window slot and scheduler row remembers pairs
    multiplied ahead of time.

    Each cycle every scheduler row ``r`` schedules ``effectual & ~consumed``;
    its selects ``MS_r`` drive the B-side mux block of its row and the A-side
    mux block of each PE ``(r, c)``. The buffer advances by the minimum of the
    rows' ``AS`` (row synchronization). Products are registered; the next
    stage accumulates them (two-stage pipeline, as the dense PE), and the sums
    of a ``read`` row leave through a :class:`~trainforge.hw.stream_stage.StreamStage`
    (full rate: the result is out the cycle after it is accumulated, as the
    golden cycle model says; ``o_sum.ready`` reaches the pipeline only through
    the stage's registered ``ready``).

    Parameters
    ----------
    rows, cols : int
        PE rows (one B operand stream and one scheduler each) and columns (one A operand stream each).
    lanes, depth : int
    pattern : tuple of (int, int)
        Validated connectivity pattern.
    both_sides : bool
        A pair is effectual when A and B are non-zero (else when B is non-zero).
    mac : str
        Key of :data:`~trainforge.hw.tensordash.mac.MAC_UNITS`.
    width, acc_width : int
    signed : bool
    row_layout : data.StructLayout
        One stream row: ``a``, ``b``, ``clear``, ``read``.
    result_shape : shape
        Payload of ``o_sum``.
    """

    #: Cycles from the scheduling cycle that drains a ``read`` row to its result on ``o_sum``.
    LATENCY = spec.LATENCY

    def _setup(self, *, rows, cols, lanes, depth, pattern, both_sides, mac, width, acc_width, signed):
        self.rows = rows
        self.cols = cols
        self.lanes = lanes
        self.depth = depth
        self.pattern = pattern
        self.both_sides = both_sides
        self.mac = MAC_UNITS[mac](width=width, acc_width=acc_width, signed=signed)
        self.width = width
        self.acc_width = acc_width
        self.is_signed = signed
        self.operand_shape = self.mac.operand_shape
        self.group_layout = spec.group_layout(self.row_layout, depth)
        self.levels = lane_levels(pattern, lanes)
        super().__init__({
            "i_group": In(stream.Signature(self.group_layout)),
            "o_sum": Out(stream.Signature(self.result_shape)),
        })

    def operand_a(self, row_view, col):
        """The A lanes of column ``col`` in one stream row."""
        raise NotImplementedError

    def operand_b(self, row_view, row):
        """The B lanes of PE row ``row`` in one stream row."""
        raise NotImplementedError

    def result(self, payload, row, col):
        """The result of PE ``(row, col)`` in the ``o_sum`` payload."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        rows, cols, lanes, depth = self.rows, self.cols, self.lanes, self.depth
        slots = [Signal(self.row_layout, name=f"slot{k}") for k in range(2 * depth)]
        count = Signal(range(2 * depth + 1))
        consumed = [[Signal(lanes, name=f"consumed_r{r}_d{d}") for d in range(depth)] for r in range(rows)]
        window = slots[:depth]

        # Visible rows: present, after no read row, at or before no clear row (the head excepted).
        visible = Signal(depth)
        read_before = Const(0)
        clear_seen = Const(0)
        for d in range(depth):
            if d:
                clear_seen = clear_seen | window[d].clear
            m.d.comb += visible[d].eq((count > d) & ~read_before & ~clear_seen)
            read_before = read_before | window[d].read

        # Zero detectors and the row schedulers.
        schedulers = []
        for r in range(rows):
            candidates = []
            for d in range(depth):
                b_lanes = self.operand_b(window[d], r)
                effectual = Signal(lanes, name=f"effectual_r{r}_d{d}")
                for lane in range(lanes):
                    nonzero = b_lanes[lane] != 0
                    if self.both_sides:
                        nonzero = nonzero & (self.operand_a(window[d], 0)[lane] != 0)
                    m.d.comb += effectual[lane].eq(nonzero)
                candidate = Signal(lanes, name=f"candidates_r{r}_d{d}")
                m.d.comb += candidate.eq(effectual & ~consumed[r][d])
                candidates.append(candidate)
            schedulers.append(schedule_logic(m, candidates, visible, self.pattern, lanes, depth, f"row{r}_"))

        # Row synchronization: the whole tile advances by the smallest AS.
        advance = schedulers[0][3]
        for row_schedule in schedulers[1:]:
            advance = Mux(row_schedule[3] < advance, row_schedule[3], advance)

        products_valid = Signal()
        products_clear = Signal()
        products_read = Signal()
        products = [[[Signal(self.mac.product_shape, name=f"product_r{r}_c{c}_l{lane}") for lane in range(lanes)]
                     for c in range(cols)] for r in range(rows)]
        m.submodules.result_stage = result_stage = StreamStage(self.result_shape)
        wiring.connect(m, result_stage.o_stream, wiring.flipped(self.o_sum))
        result_slot_free = result_stage.i_stream.ready
        accumulate = Signal()
        pipeline_free = Signal()
        fire = Signal()
        shift = Signal(range(depth + 1))
        remaining = Signal(range(2 * depth + 1))
        accept = Signal()
        read_drained = Signal()
        m.d.comb += [
            accumulate.eq(products_valid & (~products_read | result_slot_free)),
            pipeline_free.eq(~products_valid | accumulate),
            fire.eq((count > 0) & pipeline_free),
            shift.eq(Mux(fire, advance, 0)),
            remaining.eq(count - shift),
            self.i_group.ready.eq(remaining <= depth),
            accept.eq(self.i_group.valid & self.i_group.ready),
            read_drained.eq(0),
        ]
        for d in range(depth):
            with m.If((advance > d) & window[d].read):
                m.d.comb += read_drained.eq(1)

        # Staging buffer: shift out the drained rows, write a new group behind the rest.
        # Per-slot if-chains rather than one case statement: the Verilog back end splits processes per signal.
        for k in range(2 * depth):
            write = m.If
            for step in range(1, min(depth, 2 * depth - 1 - k) + 1):
                with write(shift == step):
                    m.d.sync += slots[k].eq(slots[k + step])
                write = m.Elif
        for r, (_, _, chosen, _) in enumerate(schedulers):
            for d in range(depth):
                write = m.If
                for step in range(1, depth + 1):
                    with write(shift == step):
                        kept = consumed[r][d + step] | chosen[d + step] if d + step < depth else 0
                        m.d.sync += consumed[r][d].eq(kept)
                    write = m.Elif
        m.d.sync += count.eq(remaining + Mux(accept, depth, 0))
        for k in range(2 * depth):
            write = m.If
            for left in range(max(0, k - depth + 1), min(k, depth) + 1):
                with write(accept & (remaining == left)):
                    m.d.sync += slots[k].eq(self.i_group.payload[k - left])
                write = m.Elif

        # Sparse muxes (A side per PE, B side per row, same MS) and the multipliers.
        for r, (ms, active, _, _) in enumerate(schedulers):
            for lane in range(lanes):
                b_value = Signal(self.operand_shape, name=f"b_r{r}_l{lane}")
                a_values = [Signal(self.operand_shape, name=f"a_r{r}_c{c}_l{lane}") for c in range(cols)]
                options = option_slots(self.pattern, lanes, lane)
                with m.Switch(ms[lane]):  # the Default arm is the last option
                    for index, (row, column) in enumerate(options):
                        with (m.Case(index) if index < len(options) - 1 else m.Default()):
                            m.d.comb += b_value.eq(Mux(active[lane],
                                                       self.operand_b(window[row], r)[column], 0))
                            for c in range(cols):
                                m.d.comb += a_values[c].eq(self.operand_a(window[row], c)[column])
                with m.If(pipeline_free):
                    for c in range(cols):
                        m.d.sync += products[r][c][lane].eq(self.mac.multiply(a_values[c], b_value))
        with m.If(pipeline_free):
            m.d.sync += [
                products_valid.eq(fire),
                products_clear.eq(window[0].clear),
                products_read.eq(read_drained),
            ]

        # Accumulators; a read row's sums go through the result stream stage.
        m.d.comb += result_stage.i_stream.valid.eq(products_valid & products_read)
        for r in range(rows):
            for c in range(cols):
                accumulator = Signal(self.mac.result_shape, name=f"accumulator_r{r}_c{c}")
                updated = Signal(self.mac.result_shape, name=f"updated_r{r}_c{c}")
                m.d.comb += [
                    updated.eq(self.mac.accumulate(accumulator, products[r][c], products_clear)),
                    self.result(result_stage.i_stream.payload, r, c).eq(updated),
                ]
                with m.If(accumulate):
                    m.d.sync += accumulator.eq(updated)
        return m
