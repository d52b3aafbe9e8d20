"""The datapath shared by the TensorDash PE and tile: staging buffers, schedulers, sparse muxes, MAC pipeline.

The exact rules are those of the golden cycle model
:mod:`trainforge.golden.tensordash.core`; this module is their RTL.
"""
from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec import tensordash as spec
from ...spec.tensordash import lane_levels, option_slots
from ..mac import MAC_UNITS
from ..stream_stage import StreamStage
from ..synthesis import replica_attrs
from .scheduler import schedule_logic

__all__ = ["TDSparseCore"]


def _delayed(m, value, stages, enable, name, reset):
    """``value`` through ``stages`` registers with clock enable ``enable``."""
    for stage in range(stages):
        register = Signal(Value.cast(value).shape(), name=f"{name}_{stage}", reset_less=not reset)
        with m.If(enable):
            m.d.sync += register.eq(value)
        value = register
    return value


class TDSparseCore(wiring.Component):
    """``rows`` x ``cols`` PEs behind one staging buffer per operand stream and ``rows`` schedulers.

    Staging buffer (paper, Section III-A: "an array of registers with as many
    row-wide write ports as the number of rows it can hold")
        Groups of ``depth`` rows arrive on ``i_group`` into one of three
        *group registers*; a group is taken when a group register is free at
        the start of the cycle, so ``i_group.ready`` is a function of
        registers (no stream stage is needed in front). The *window* is
        ``depth`` row registers written in place: stream row ``t`` lives in
        window row ``t mod depth`` and is written once, from a group register,
        when it fits behind the head. Data registers have clock enables and no
        reset. Zero detection and the ``read``/``clear`` flags are computed when
        a group is taken, into a head-relative queue of the waiting rows' flags
        (stored as it stood before the last advance, shifted when read, so that
        nothing rotates by the head in the scheduling loop); the window's flags
        are kept in stream order (the pending pairs: effectual and not
        multiplied yet) and shift by the advance. Only flags move. The window's data
        follows its flags one cycle later, so the operand stage reads the window
        as the scheduler saw it and no decision of the scheduling cycle drives a
        data register's enable.
    Schedule stage
        The pending pairs of each row scheduler (and the registered visible
        rows) give its selects; the tile advances by the smallest ``AS`` of its
        rows (the AND of their thermometer codes), and everything the advance
        decides is precomputed from registers for each possible advance, then
        picked. ``MS``, ``active`` and the head are registered.
    Operand stages
        In a tile of more than one row, each operand stream's window is rotated
        into stream order by the registered head and registered (once per
        stream: the B side per scheduler row, the A side per column, shared by
        the column's PEs); then each lane's sparse mux picks its option among
        those rows (8 inputs for the paper's pattern). A single row of PEs
        (the PE) folds the head into each lane's select instead: one stage,
        each lane choosing among the window slots it can reach at any head (16
        for the paper's pattern). Either way the multiplier operands are
        registered (B side per scheduler row, A side per PE).
    MAC
        The MAC unit's multiplier and lane reduction
        (:mod:`trainforge.hw.mac`), then the accumulator; a ``read`` row's sums
        leave through a :class:`~trainforge.hw.stream_stage.StreamStage`.

    The whole pipeline stops (one clock enable) only while a result waits for
    the output stage, whose ``ready`` is a register: nothing combinational
    runs from ``o_sum.ready`` into the scheduler or to ``i_group.ready``.

    Parameters
    ----------
    rows, cols : int
        PE rows (one B operand stream and one scheduler each) and columns (one A operand stream each).
    params : dict
        The block's resolved parameters (``lanes``, ``depth``, ``mac`` and the MAC unit's).
    pattern : tuple of (int, int)
        Validated connectivity pattern.
    both_sides : bool
        A pair is effectual when A and B are non-zero (else when B is non-zero).
    row_layout : data.StructLayout
        One stream row: ``a``, ``b``, ``clear``, ``read``.
    result_shape : shape
        Payload of ``o_sum``.
    """

    def _setup(self, *, rows, cols, params, pattern, both_sides):
        self.rows = rows
        self.cols = cols
        self.pattern = pattern
        self.both_sides = both_sides
        self.is_signed = params["signed"]
        self.mac_unit = MAC_UNITS[params["mac"]](params)
        self.operand_shape = self.mac_unit.operand_shape
        self.group_layout = spec.group_layout(self.row_layout, self.depth)
        self.flag_layout = data.StructLayout({
            "effectual": data.ArrayLayout(self.lanes, rows),
            "read": 1,
            "clear": 1,
        })
        self.levels = lane_levels(pattern, self.lanes)
        #: Cycles from the scheduling cycle that drains a ``read`` row to its result on ``o_sum``.
        self.latency = spec.latency(params)
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

    def _flags(self, row_view):
        """Zero detection and flags of one stream row, as a ``flag_layout`` value's fields."""
        unit = self.mac_unit
        effectual = []
        for r in range(self.rows):
            for lane in range(self.lanes):
                nonzero = ~unit.is_zero(self.operand_b(row_view, r)[lane])
                if self.both_sides:
                    nonzero = nonzero & ~unit.is_zero(self.operand_a(row_view, 0)[lane])
                effectual.append(nonzero)
        return Cat(*effectual, row_view.read, row_view.clear)

    def elaborate(self, platform):
        m = Module()
        rows, cols, lanes, depth = self.rows, self.cols, self.lanes, self.depth
        unit = self.mac_unit
        enable = Signal()

        # Groups go straight into the group registers (whose ready is a function of registers); results
        # leave through the output stream stage.
        incoming = self.i_group
        m.submodules.result_stage = result_stage = StreamStage(self.result_shape)
        wiring.connect(m, result_stage.o_stream, wiring.flipped(self.o_sum))

        # Staging buffer: three group registers (flags beside the data) and the window.
        groups = spec.GROUP_REGISTERS
        ring = groups * depth                       # group-register positions: stream row t waits at t mod ring
        group_rows = [[Signal(self.row_layout, name=f"group{g}_row{p}", reset_less=True) for p in range(depth)]
                      for g in range(groups)]
        # The flags of the rows waiting in the group registers, head-relative: queue[k] holds stream row
        # head + k (meaningful for k in [window_count, window_count + waiting)). They shift by the advance
        # with the window's flags, so the next flags never rotate by the head in the scheduling loop. A
        # taken group lands at most at head + (depth + ring - depth) + depth - 1.
        queue_rows = ring + depth
        queue = [Signal(self.flag_layout, name=f"queue{k}", reset_less=True) for k in range(queue_rows)]
        window = [Signal(self.row_layout, name=f"window_row{p}", reset_less=True) for p in range(depth)]

        # Control state: the head, the row counts, and the window's flags in stream order (pending pairs:
        # effectual and not multiplied yet).
        head_slot = Signal(range(depth))            # window row of the head: head mod depth
        load_ring = Signal(range(ring))             # (head + rows in the window) mod ring: the next row to load
        window_count = Signal(range(depth + 1))     # rows in the window
        waiting = Signal(range(ring + 1))           # rows in the group registers, not yet in the window
        pending = [[Signal(lanes, name=f"pending_r{r}_d{d}", reset_less=True) for d in range(depth)]
                   for r in range(rows)]
        row_read = [Signal(name=f"read_d{d}", reset_less=True) for d in range(depth)]
        row_clear = [Signal(name=f"clear_d{d}", reset_less=True) for d in range(depth)]

        # Visible rows (a register, computed with the next state below): present, after no read row, at or
        # before no clear row (the head excepted). In a tile, each row's scheduling loop has its own copy
        # (a register replica, kept apart by the FPGA flow) loaded by its own pick of the next state, so the
        # loop's start and end sit beside the row; ``visible`` serves the shared state.
        visible = Signal(depth, attrs=replica_attrs() if rows > 1 else {})
        row_visible = ([Signal(depth, name=f"visible_r{r}", attrs=replica_attrs()) for r in range(rows)]
                       if rows > 1 else [visible])

        def visible_rows(count, reads, clears):
            read_before, clear_seen, bits = Const(0), Const(0), []
            for d in range(depth):
                if d:
                    clear_seen = clear_seen | clears[d]
                bits.append((count > d) & ~read_before & ~clear_seen)
                read_before = read_before | reads[d]
            return Cat(*bits)

        # The row schedulers, and row synchronization: the tile advances by the smallest AS
        # (the AND of the rows' thermometer codes).
        schedulers = [schedule_logic(m, pending[r], row_visible[r], self.pattern, lanes, depth, f"row{r}_")
                      for r in range(rows)]
        drained = [Signal(name=f"drained{d}") for d in range(depth)]
        for d in range(depth):
            if d == 0:
                # The head row is always drained when visible: lane i's first option (0, 0) is slot (0, i)
                # (validate_pattern), so every pending pair of the head row is taken by some lane.
                m.d.comb += drained[0].eq(visible[0])
            else:
                m.d.comb += drained[d].eq(Cat(*(row_schedule[4][d] for row_schedule in schedulers)).all())

        # The output stage's ready is a register; the pipeline stops only for a result it cannot take.
        result_valid = Signal()
        m.d.comb += enable.eq(~(result_valid & ~result_stage.i_stream.ready))

        # This cycle's shift s is the number of drained rows (``drained`` is its thermometer code).
        # Everything the shift decides is computed from registers for each s, then picked by its one-hot code.
        # While the pipeline stops, the whole buffer holds (every update below is enabled by ``enable``,
        # a function of registers).
        state = []  # the buffer's register updates, made while enabled

        def shift_code(head_visible, name):
            """One-hot code of this cycle's shift (``code[s]``: shift == s), the head row's drained bit
            taken from ``head_visible`` (a copy of ``visible[0]``)."""
            code = [Signal(name=f"{name}{step}") for step in range(depth + 1)]
            m.d.comb += code[0].eq(~head_visible)
            for step in range(1, depth + 1):
                less = head_visible if step == 1 else drained[step - 1]
                more = drained[step] if step < depth else Const(0)
                m.d.comb += code[step].eq(less & ~more)
            return code

        shift_is = shift_code(drained[0], "shift_is")
        # Each tile row's own copy of the code, from its own ``visible`` copy: its picks of its own next
        # flags and ``visible`` read no net that fans out over the whole tile.
        row_shift_is = ([shift_code(row_visible[r][0], f"row{r}_shift_is") for r in range(rows)]
                        if rows > 1 else [shift_is])

        def pick(values, name, shape, code=None):
            """``values[s]`` for this cycle's shift ``s``: an AND-OR of the one-hot code (two LUT levels
            for the late selects, whatever the depth of the early values); ``code`` defaults to the
            shared ``shift_is``."""
            code = shift_is if code is None else code
            picked = Signal(shape, name=name)
            result = 0
            for step, value in enumerate(values):
                result = result | Mux(code[step], value, 0)
            m.d.comb += picked.eq(result)
            return picked

        loads_for = []
        for step in range(depth + 1):
            room = Signal(range(2 * depth + 1), name=f"room{step}")
            loads = Signal(range(depth + 1), name=f"loads{step}")
            m.d.comb += [
                room.eq(step + depth - window_count),
                loads.eq(Mux(room < waiting, room, waiting)),
            ]
            loads_for.append(loads)

        def wrap(value, modulus):
            return Mux(value >= modulus, value - modulus, value)

        count_for = [Signal(range(depth + 1), name=f"window_count{step}") for step in range(depth + 1)]
        m.d.comb += [count_for[step].eq(window_count - step + loads_for[step]) for step in range(depth + 1)]
        take = Signal()
        room = Signal()  # a group register is free at the start of the cycle
        m.d.comb += [
            room.eq(waiting <= ring - depth),
            # Ready depends on registers only.
            incoming.ready.eq(enable & room),
            take.eq(incoming.valid & incoming.ready),
        ]
        state += [
            head_slot.eq(pick([wrap(head_slot + step, depth) for step in range(depth + 1)], "next_head_slot",
                              range(depth))),
            load_ring.eq(pick([wrap(load_ring + loads_for[step], ring) for step in range(depth + 1)],
                              "next_load_ring", range(ring))),
            window_count.eq(pick(count_for, "next_window_count", range(depth + 1))),
            # Per shift, beside the schedule: the pick is the last step, as for the other counts.
            waiting.eq(pick([waiting - loads_for[step] + Mux(take, depth, 0) for step in range(depth + 1)],
                            "next_waiting", range(ring + 1))),
        ]

        # The queue is stored as it stood before the last cycle's shift (registered beside it as
        # ``last_shift_is``) and shifted when read, at the start of the cycle: so the late shift of the
        # scheduling loop fans out to the few flags it must decide, not to the whole queue. A group taken
        # in this cycle lands behind the rows waiting, at relative positions window_count + waiting + j;
        # stream row head + k has residue (head_slot + k) mod depth, and row j of a group has residue j.
        last_shift_is = Signal(depth + 1, init=1)
        # ``tail_at_or_before[p]`` is (window_count + waiting <= p) before the last shift: a thermometer code
        # of where a taken group lands. A take moves it up by depth (positions beyond are all ones).
        tail_at_or_before = Signal(queue_rows, init=(1 << queue_rows) - 1)

        def shifted(bit_at, count, name, shape):
            """Entries ``bit_at(k + s)`` for k < ``count``, s the last shift: the read of a lazy queue."""
            values = [Signal(shape, name=f"{name}{k}") for k in range(count)]
            for k, value in enumerate(values):
                m.d.comb += value.eq(0)
                for step in range(depth + 1):
                    with m.If(last_shift_is[step]):
                        m.d.comb += value.eq(bit_at(k + step))
            return values

        behind = shifted(lambda k: queue[k] if k < queue_rows else 0, queue_rows, "queue_now", self.flag_layout)
        tail_now = Cat(*shifted(lambda p: tail_at_or_before[p] if p < queue_rows else 1, queue_rows,
                                "tail_at_or_before_now", 1))

        def tail_bit(p):
            return tail_now[p] if p >= 0 else Const(0)

        incoming_flags = [Signal(self.flag_layout, name=f"incoming_flags{j}") for j in range(depth)]
        m.d.comb += [incoming_flags[j].eq(self._flags(incoming.payload[j])) for j in range(depth)]
        landing = [Signal(self.flag_layout, name=f"landing_residue{r}") for r in range(depth)]
        with m.Switch(head_slot):
            for head in range(depth):
                with m.Case(head) if head < depth - 1 else m.Default():
                    m.d.comb += [landing[r].eq(incoming_flags[(head + r) % depth]) for r in range(depth)]
        for k in range(queue_rows):
            lands = take & tail_bit(k) & ~tail_bit(k - depth)
            state.append(queue[k].eq(Mux(lands, landing[k % depth], behind[k])))
        state += [
            tail_at_or_before.eq(Mux(take, Cat(*(tail_bit(p - depth) for p in range(queue_rows))), tail_now)),
            last_shift_is.eq(Cat(*shift_is)),
        ]

        # Row d of the next cycle is row d + s of this one: from the window while it is there, else loaded.
        flag_sources = []
        for d in range(depth):
            sources = {name: [] for name in ("read", "clear")}
            pending_sources = [[] for _ in range(rows)]
            for step in range(depth + 1):
                k = d + step
                in_window = window_count > k if k < depth else Const(0)
                for r, (_, _, chosen, _, _) in enumerate(schedulers):
                    # Shift 0: nothing was scheduled (or the pipeline stopped and the schedule is void).
                    kept = (pending[r][k] & ~chosen[k] if step else pending[r][k]) if k < depth else 0
                    pending_sources[r].append(Mux(in_window, kept, behind[k].effectual[r]))
                sources["read"].append(Mux(in_window, row_read[k] if k < depth else 0, behind[k].read))
                sources["clear"].append(Mux(in_window, row_clear[k] if k < depth else 0, behind[k].clear))
            for r in range(rows):
                state.append(pending[r][d].eq(pick(pending_sources[r], f"next_pending_r{r}_d{d}", lanes,
                                                   row_shift_is[r])))
            state += [
                row_read[d].eq(pick(sources["read"], f"next_read_d{d}", 1)),
                row_clear[d].eq(pick(sources["clear"], f"next_clear_d{d}", 1)),
            ]
            flag_sources.append(sources)
        visible_for = [Signal(depth, name=f"visible_after{step}") for step in range(depth + 1)]
        m.d.comb += [visible_for[step].eq(visible_rows(count_for[step],
                                                       [flag_sources[d]["read"][step] for d in range(depth)],
                                                       [flag_sources[d]["clear"][step] for d in range(depth)]))
                     for step in range(depth + 1)]
        state.append(visible.eq(pick(visible_for, "next_visible", depth)))
        if rows > 1:
            state += [row_visible[r].eq(pick(visible_for, f"next_visible_r{r}", depth, row_shift_is[r]))
                      for r in range(rows)]

        # Window row p takes the next stream row of its residue when that fits behind the head.
        data_loads, data_sources = [], []
        for p in range(depth):
            offset = Signal(range(depth), name=f"load_offset{p}")   # its place among the rows to load
            source = Signal(range(groups), name=f"load_group{p}")   # the group register holding it
            with m.Switch(load_ring):
                for position in range(ring):
                    with m.Case(position) if position < ring - 1 else m.Default():
                        j = (p - position) % depth
                        m.d.comb += [offset.eq(j), source.eq((position + j) % ring // depth)]
            load = pick([offset < loads_for[step] for step in range(depth + 1)], f"load{p}", 1)
            data_load = Signal(name=f"data_load{p}")
            data_source = Signal(range(groups), name=f"data_group{p}", reset_less=True)
            state += [data_load.eq(load), data_source.eq(source)]
            data_loads.append(data_load)
            data_sources.append(data_source)
            with m.If(enable & data_load), m.Switch(data_source):
                for g in range(groups):
                    with m.Case(g) if g < groups - 1 else m.Default():
                        m.d.sync += window[p].eq(group_rows[g][p])
        with m.If(enable):
            m.d.sync += state

        # A taken group goes to the group register after the rows waiting (whole groups). That register was
        # free at the start of the cycle, so the window's data (which follows its flags one cycle later, so
        # that the operand stage reads the window as the scheduler saw it) has read it for the last time at
        # this edge at the latest. The data is also written while the pipeline stops, when no window load
        # still waits for that register: the stream holds its payload until taken, so the register then
        # holds what the take will write, and its clock enable does not wait for the pipeline's.
        tail = Signal(range(ring))
        m.d.comb += tail.eq(wrap(load_ring + waiting, ring))
        for g in range(groups):
            loads_waiting = Cat(*(load & (source == g) for load, source in zip(data_loads, data_sources))).any()
            with m.If(incoming.valid & room & (tail == g * depth) & (enable | ~loads_waiting)):
                m.d.sync += [group_rows[g][p].eq(incoming.payload[p]) for p in range(depth)]

        # Schedule stage registers.
        selects = [[Signal.like(schedulers[r][0][lane], name=f"select_r{r}_l{lane}") for lane in range(lanes)]
                   for r in range(rows)]
        selects_active = [Signal(lanes, name=f"select_active_r{r}") for r in range(rows)]
        select_head = Signal.like(head_slot, name="select_head")
        read_drained = Signal()
        m.d.comb += read_drained.eq(0)
        for d in range(depth):
            with m.If(drained[d] & row_read[d]):
                m.d.comb += read_drained.eq(1)
        with m.If(enable):
            m.d.sync += select_head.eq(head_slot)
            for r, (ms, active, _, _, _) in enumerate(schedulers):
                m.d.sync += selects_active[r].eq(active)
                m.d.sync += [selects[r][lane].eq(ms[lane]) for lane in range(lanes)]
        valid = _delayed(m, window_count > 0, 1, enable, "scheduled_valid", reset=True)
        clear = _delayed(m, row_clear[0], 1, enable, "scheduled_clear", reset=False)
        read = _delayed(m, read_drained, 1, enable, "scheduled_read", reset=False)

        # Operand stages. In a tile of more than one row, each operand stream's window is first rotated into
        # stream order by the head (registered, shared by the PEs that read the stream), then each lane's
        # sparse mux picks its option among those rows; a single row of PEs folds the head into each lane's
        # select instead (one stage, no rotation). Either way the operands are registered.
        rotate = spec.rotates_window(self.params)

        def rotated(value_of, name):
            rows_in_order = [Signal.like(value_of(window[0]), name=f"{name}_d{d}") for d in range(depth)]
            with m.Switch(select_head):
                for head in range(depth):
                    with m.Case(head) if head < depth - 1 else m.Default():
                        m.d.comb += [rows_in_order[d].eq(value_of(window[(head + d) % depth]))
                                     for d in range(depth)]
            registered = [Signal.like(row, name=f"{name}_d{d}_rotated", reset_less=True)
                          for d, row in enumerate(rows_in_order)]
            with m.If(enable):
                m.d.sync += [register.eq(row) for register, row in zip(registered, rows_in_order)]
            return registered

        def folded(value_of, r, lane, name):
            """Lane ``lane``'s operand straight from the window: the select is (option, head)."""
            sources, index = [], {}
            for option, (step, column) in enumerate(option_slots(self.pattern, lanes, lane)):
                for head in range(depth):
                    slot = ((head + step) % depth, column)
                    if slot not in sources:
                        sources.append(slot)
                    index[option, head] = sources.index(slot)
            source = Signal(range(len(sources)), name=f"{name}_source")
            # Every Switch ends on a Default arm: select values that never occur add no logic.
            options = len(self.pattern)
            with m.Switch(selects[r][lane]):
                for option in range(options):
                    with m.Case(option) if option < options - 1 else m.Default():
                        with m.Switch(select_head):
                            for head in range(depth):
                                with m.Case(head) if head < depth - 1 else m.Default():
                                    m.d.comb += source.eq(index[option, head])
            value = Signal(self.operand_shape, name=name)
            with m.Switch(source):
                for number, (slot, column) in enumerate(sources):
                    with m.Case(number) if number < len(sources) - 1 else m.Default():
                        m.d.comb += value.eq(value_of(window[slot])[column])
            return _delayed(m, value, 1, enable, f"{name}_operand", reset=False)

        if rotate:
            b_rows = [rotated(lambda row, r=r: self.operand_b(row, r), f"b_r{r}") for r in range(rows)]
            a_rows = [rotated(lambda row, c=c: self.operand_a(row, c), f"a_c{c}") for c in range(cols)]
            mux_selects = [[_delayed(m, selects[r][lane], 1, enable, f"mux_select_r{r}_l{lane}", reset=False)
                            for lane in range(lanes)] for r in range(rows)]

        def operand(r, lane, stream, value_of, name):
            if not rotate:
                return folded(value_of, r, lane, name)
            value = Signal(self.operand_shape, name=name)
            options = option_slots(self.pattern, lanes, lane)
            with m.Switch(mux_selects[r][lane]):  # the Default arm is the last option
                for index, (step, column) in enumerate(options):
                    with m.Case(index) if index < len(options) - 1 else m.Default():
                        m.d.comb += value.eq(stream[step][column])
            return _delayed(m, value, 1, enable, f"{name}_operand", reset=False)

        b_operands = [[operand(r, lane, rotate and b_rows[r], lambda row, r=r: self.operand_b(row, r),
                               f"b_r{r}_l{lane}") for lane in range(lanes)] for r in range(rows)]
        a_operands = [[[operand(r, lane, rotate and a_rows[c], lambda row, c=c: self.operand_a(row, c),
                                f"a_r{r}_c{c}_l{lane}") for lane in range(lanes)]
                       for c in range(cols)] for r in range(rows)]
        operand_stages = 2 if rotate else 1
        actives = [_delayed(m, selects_active[r], operand_stages, enable, f"operands_active_r{r}", reset=False)
                   for r in range(rows)]
        valid = _delayed(m, valid, operand_stages, enable, "operands_valid", reset=True)
        clear = _delayed(m, clear, operand_stages, enable, "operands_clear", reset=False)
        read = _delayed(m, read, operand_stages, enable, "operands_read", reset=False)

        # MAC unit: multipliers, lane reductions, then the accumulators.
        sums = [[unit.reduce(m, [unit.multiply(m, a_operands[r][c][lane], b_operands[r][lane], actives[r][lane],
                                               enable, f"mul_r{r}_c{c}_l{lane}") for lane in range(lanes)],
                             enable, f"reduce_r{r}_c{c}") for c in range(cols)] for r in range(rows)]
        stages = unit.multiply_stages + unit.tree_stages
        # The accumulator takes the flags a stage ahead of its rows' sums (it registers them).
        accumulator = unit.accumulator(m, _delayed(m, valid, stages - 1, enable, "mac_valid", reset=True),
                                       _delayed(m, clear, stages - 1, enable, "mac_clear", reset=False),
                                       _delayed(m, read, stages - 1, enable, "mac_read", reset=False),
                                       enable, "accumulate")
        m.d.comb += [
            result_valid.eq(accumulator.result_valid),
            result_stage.i_stream.valid.eq(result_valid),
        ]
        for r in range(rows):
            for c in range(cols):
                m.d.comb += self.result(result_stage.i_stream.payload, r, c).eq(
                    accumulator.add(sums[r][c], f"accumulator_r{r}_c{c}"))
        return m
