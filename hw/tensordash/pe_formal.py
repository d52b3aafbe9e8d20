"""Formal wrapper of the TensorDash PE (and of the tile, per PE row): every effectual pair multiplied once, in its own
dot product."""
from amaranth import Const, Elaboratable, Module, Mux, ResetSignal, Signal, Value
from amaranth.hdl import Assert, Assume, Cover, Fragment
from amaranth.lib import data

from ...errors import ParameterError
from ...spec import tensordash as spec
from .pe import TDPE

__all__ = ["PROPERTIES", "PEDotProductProperties"]

#: The groups of properties, each asserted unless left out (a test breaks one at a time): ``counts`` (the
#: effectual pairs entering a dot product are as many as the products multiplied for it, counted from the
#: scheduler's selections when they reach the multipliers), ``sums`` (each result is the accumulation of the
#: products of its own rows, from free operand values), ``order`` (no result without its read row, none
#: before its products were multiplied) and ``lemmas`` (the ghost counters against the PE's staging buffer,
#: queue and pipeline: what makes the k-induction of ``counts`` and ``order`` go through) and ``sum_lemmas`` (the
#: ghost dense accumulator and the tagged result against the data of the rows inside, the registered operands and
#: products, the lane sum, the accumulator and the output stage: what makes the k-induction of ``sums`` go through;
#: the PE only, with ``lemmas``).
PROPERTIES = ("counts", "sums", "order", "lemmas", "sum_lemmas")

def internal_signals(rows, stage):
    """Registers of :class:`~trainforge.hw.tensordash.core.TDSparseCore` that the wrapper reads, found by name in
    the elaborated PE or tile: the last operand stage's (number ``stage``) lane selections of each of ``rows``
    scheduler rows, its valid and read flags, and the pipeline's clock enable."""
    return (*(f"operands_active_r{r}_{stage}" for r in range(rows)), f"operands_valid_{stage}",
            f"operands_read_{stage}", "enable")


#: The signals of :func:`internal_signals` in the PE (one row, one operand stage).
INTERNAL_SIGNALS = internal_signals(1, 0)


def _buffer_signals(depth, queue_rows, rows=1, operand_stages=1):
    """The names of the staging buffer's and the pipeline's signals that the lemmas read."""
    return (
        "window_count", "waiting", "head_slot", "visible", "last_shift_is",
        *(f"pending_r{r}_d{d}" for r in range(rows) for d in range(depth)),
        *(f"{name}{d}" for name in ("read_d", "clear_d") for d in range(depth)),
        *(f"queue_now{k}" for k in range(queue_rows)),
        *(f"tail_at_or_before_now{k}" for k in range(queue_rows)),
        "scheduled_valid_0", "scheduled_read_0", *(f"select_active_r{r}" for r in range(rows)),
        *((f"visible_r{r}" for r in range(rows)) if rows > 1 else ()),
        # The operand stages before the last (the wrapper reads the last one's as internal signals).
        *(f"operands_{flag}_{stage}" for flag in ("valid", "read") for stage in range(operand_stages - 1)),
        *(f"operands_active_r{r}_{stage}" for r in range(rows) for stage in range(operand_stages - 1)),
        "mac_valid_0", "mac_valid_1", "mac_read_0", "mac_read_1", "accumulate_row_valid", "accumulate_row_read",
    )


#: Registers of the PE's output :class:`~trainforge.hw.stream_stage.StreamStage` (submodule ``result_stage``)
#: that the lemmas read.
RESULT_STAGE_SIGNALS = ("output_valid", "skid_valid")


def _signals_named(fragment, names):
    """The signals of ``names`` assigned in ``fragment`` itself (not its subfragments), by name; the first of each."""
    found = {}
    for statements in fragment.statements.values():
        for statement in statements:
            for signal in statement._lhs_signals():
                if signal.name in names:
                    found.setdefault(signal.name, signal)
    return found


def _in_row(row, rows):
    """The end of a message about scheduler row ``row``: empty in a PE (one row), `` (PE row <row>)`` in a tile."""
    return "" if rows == 1 else f" (PE row {row})"


def _count_bits(bits, width):
    """The number of ones in ``bits`` (a value, or a list of one-bit values), as a ``width``-bit value."""
    total = Value.cast(0)
    for bit in (bits if isinstance(bits, list) else Value.cast(bits)):
        total = total + bit
    return total[:width]


class PEDotProductProperties(Elaboratable):
    """A ``td_pe`` between a free producer and a free consumer, with ghost counters per dot product.

    Rows are grouped into *dot products*: the rows after one ``read`` row up to
    and including the next. A free constant ``tag`` picks one dot product (any
    one: the proof holds for every value of it). The wrapper follows it with
    ghost state, computed from the stream and not from the PE's code:

    - at the input, the number of its effectual pairs (``a`` and ``b`` non-zero) and its expected result:
      the dense PE's accumulation (a ``clear`` row restarts it) of the products of the rows up to its
      ``read`` row, wrapped to the accumulator's width;
    - at the multipliers, the number of lanes the scheduler selected for it (the operand stage's
      ``active`` bits, counted each cycle the pipeline moves; the operand stage's ``read`` flag closes it).

    Asserted (``counts``): when its ``read`` row reaches the multipliers, the products counted equal the
    effectual pairs that entered, all of which have entered. Asserted (``sums``): the ``tag``-th result on
    ``o_sum`` equals the expected result, from free operand values (a pair dropped, multiplied twice, or
    taken from another dot product changes it for some values). Asserted (``order``): no result leaves
    before its ``read`` row entered and its products were multiplied.

    Assumed: no reset after the start; ``i_group`` keeps the stream rules (valid and payload hold until
    ready); ``o_sum.ready`` is free.

    Asserted (``lemmas``, for k-induction, which starts from any state): the ghost counters against the
    PE's registers (see :meth:`_lemmas`). The ghost counters count modulo a power of two: dot products
    modulo ``2**count_bits`` (the lemmas bound those in flight below it, so the tag names one of them),
    pairs modulo ``2**pair_bits`` (so ``counts`` says "equal modulo ``2**pair_bits``": a pair dropped or
    multiplied twice still shows). The pairs lemma is asserted only with ``counts`` (nothing else rests on it).

    Asserted (``sum_lemmas``, the PE only, with ``lemmas``): the ghost dense accumulator and the tagged expected
    result against the data of the rows inside and the MAC's registers (see :meth:`_sum_lemmas`): what makes the
    k-induction of ``sums`` go through.

    Parameters
    ----------
    pe : TDPE, optional
        The PE under proof (a deliberately broken one shows that the proof can fail); by default
        ``TDPE(**params)``.
    properties : sequence of str
        The groups of :data:`PROPERTIES` to assert (all by default).
    count_bits : int
        Width of the ghost dot-product counters and of ``tag``; with ``lemmas``, wide enough to number the
        read rows in flight and one more (:meth:`reads_in_flight`: 4 bits at 2 rows deep, 5 at 4).
    pair_bits : int, optional
        Width of the ghost pair counters (``count_bits`` by default).
    **params
        ``td_pe`` parameters (integer MAC, ``mode="both"``).

    Attributes
    ----------
    ports : list of Value
        The free inputs of the wrapper.
    core : TDSparseCore
        The design under proof: the PE; a tile in
        :class:`~trainforge.hw.tensordash.tile_formal.TileDotProductProperties`, which follows each PE row's pairs
        with the same ghost state and lemmas.
    operand_stages : int
        Registered operand stages between the schedule stage and the multipliers (1 in the PE).
    """

    def __init__(self, pe=None, properties=PROPERTIES, count_bits=6, pair_bits=None, **params):
        self.pe = TDPE(**params) if pe is None else pe
        if self.pe.params["mac"] != "integer" or self.pe.params["mode"] != "both":
            raise ParameterError(f"the PE proof takes mac='integer' and mode='both', not "
                                 f"mac={self.pe.params['mac']!r}, mode={self.pe.params['mode']!r}")
        self._setup(self.pe, properties, count_bits, pair_bits)

    #: The groups of properties this wrapper knows.
    known_properties = PROPERTIES

    def _setup(self, core, properties, count_bits, pair_bits, sum_pes=None):
        """Check and keep the settings common to the PE's and the tile's wrappers; make the free inputs."""
        unknown = set(properties) - set(self.known_properties)
        if unknown:
            raise ParameterError(f"unknown properties {sorted(unknown)}; known: {', '.join(self.known_properties)}")
        every_pe = [(r, c) for r in range(core.rows) for c in range(core.cols)]
        #: The PEs whose sums are asserted (``sums``), as (row, column) pairs.
        self.sum_pes = every_pe if sum_pes is None else [tuple(pe) for pe in sum_pes]
        outside = set(self.sum_pes) - set(every_pe)
        if outside:
            raise ParameterError(f"parameter 'sum_pes' names PEs {sorted(outside)} outside the "
                                 f"{core.rows} x {core.cols} PEs")
        self.properties = tuple(properties)
        self.core = core
        if "sum_lemmas" in self.properties and ("lemmas" not in self.properties or core.rows != 1 or core.cols != 1):
            raise ParameterError("the sum lemmas ('sum_lemmas') are written for the PE (one row, one column) and "
                                 "rest on the ghost counters' lemmas: give 'lemmas' with them")
        #: Registered operand stages between the schedule stage and the multipliers (2 in a tile of several rows).
        self.operand_stages = 2 if spec.rotates_window(core.params) else 1
        self.count_bits = count_bits
        self.pair_bits = count_bits if pair_bits is None else pair_bits
        in_flight = self.reads_in_flight()
        if "lemmas" in self.properties and count_bits < in_flight.bit_length():
            raise ParameterError(f"parameter 'count_bits' = {count_bits} is too narrow for the lemmas: up to "
                                 f"{in_flight} read rows are in flight; allowed: {in_flight.bit_length()} or more")
        self.i_valid = Signal()
        self.i_payload = Signal(len(Value.cast(core.i_group.payload)))
        self.o_ready = Signal()
        self.tag = Signal(count_bits)
        self.ports = [self.i_valid, self.i_payload, self.o_ready, self.tag]

    def operands(self, view, row, col):
        """The A and B lanes of PE ``(row, col)`` in stream row ``view``."""
        return view.a, view.b

    def effectual(self, view, row, lane):
        """Whether the pair of ``lane`` of scheduler row ``row`` in stream row ``view`` is effectual, from the
        stream (the PE skips a pair when A or B is zero)."""
        return (view.a[lane] != 0) & (view.b[lane] != 0)

    def reads_in_flight(self):
        """The most read rows inside the PE at once: the queue and window, the schedule and operand stages, the MAC
        stages before the accumulator, its row register and the output stage (15 at 2 rows deep, one more per
        extra operand stage)."""
        core = self.core
        mac_stages = core.mac_unit.multiply_stages + core.mac_unit.tree_stages - 1
        return (spec.GROUP_REGISTERS + 1) * core.depth + 1 + self.operand_stages + mac_stages + 1 + 2

    def elaborate(self, platform):
        m = Module()
        pe = self.core
        lanes, depth, bits, pair_bits, rows = pe.lanes, pe.depth, self.count_bits, self.pair_bits, pe.rows
        result_shape = pe.result_shape

        def check(group, condition, message):
            # src_loc_at=1: a failure names the line that called check(), not this one.
            if group in self.properties:
                m.d.comb += Assert(condition, message, src_loc_at=1)

        def per_row(name):
            # The PE keeps the names of one row; a tile's ghost counters are named by their row.
            return name if rows == 1 else f"{name}_r{{}}"

        fragment = Fragment.get(pe, platform)
        # Several signals are named "enable" (the multipliers' copies of the PE's): all equal it.
        last = self.operand_stages - 1
        names = internal_signals(rows, last)
        found = _signals_named(fragment, names)
        missing = set(names) - set(found)
        if missing:
            raise ParameterError(f"the design under proof has no signals {sorted(missing)}")
        internal = {"active": [found[f"operands_active_r{r}_{last}"] for r in range(rows)],
                    "valid": found[f"operands_valid_{last}"], "read": found[f"operands_read_{last}"],
                    "enable": found["enable"]}
        m.submodules.pe = fragment
        enable = internal["enable"]

        # Free producer (keeping the stream rules), free consumer, no reset after the start.
        m.d.comb += [
            pe.i_group.valid.eq(self.i_valid),
            Value.cast(pe.i_group.payload).eq(self.i_payload),
            pe.o_sum.ready.eq(self.o_ready),
            Assume(~ResetSignal()),
        ]
        past_known = Signal()
        past_stalled = Signal()
        past_payload = Signal.like(self.i_payload)
        past_tag = Signal.like(self.tag)
        m.d.sync += [past_known.eq(1), past_stalled.eq(self.i_valid & ~pe.i_group.ready),
                     past_payload.eq(self.i_payload), past_tag.eq(self.tag)]
        with m.If(past_known):
            m.d.comb += Assume(self.tag == past_tag)
            with m.If(past_stalled):
                m.d.comb += Assume(self.i_valid & (self.i_payload == past_payload))

        # Input side: the dot product of each row (reads before it), the effectual pairs of each scheduler row (the
        # PE's one; a tile's PE rows, whose columns share their row's B operands and schedule) and the dense PE's
        # accumulator, row by row through a taken group.
        reads_in = Signal(bits)           # read rows entered: the index of the dot product the next row is in
        entered = [Signal(pair_bits, name=per_row("entered").format(r)) for r in range(rows)]
        entered_all = Signal()            # its read row has entered
        # The dense PE's accumulator after the rows entered, and the tagged dot product's result, per PE.
        pes = self.sum_pes
        element_shape = result_shape if rows == 1 else pe.element_shape
        model = {}
        expected = {}
        for r, c in pes:
            model[r, c] = Signal(element_shape, name="model" if rows == 1 else f"model_r{r}_c{c}")
            expected[r, c] = Signal(element_shape, name="expected" if rows == 1 else f"expected_r{r}_c{c}")
        take = self.i_valid & pe.i_group.ready
        index, count, accumulator, closed, result = reads_in, list(entered), dict(model), entered_all, dict(expected)
        for row in range(depth):
            view = pe.i_group.payload[row]
            ours = index == self.tag
            count_after = []
            for r in range(rows):
                effectual = [self.effectual(view, r, lane) for lane in range(lanes)]
                after = Signal(pair_bits, name=f"{per_row('entered').format(r)}_after_row{row}")
                m.d.comb += after.eq(count[r] + (ours * _count_bits(effectual, pair_bits)))
                count_after.append(after)
            closed_after = Signal(name=f"entered_all_after_row{row}")
            m.d.comb += closed_after.eq(closed | (ours & view.read))
            if self._models_sums():
                for r, c in pes:
                    a, b = self.operands(view, r, c)
                    products = sum(a[lane] * b[lane] for lane in range(lanes))
                    where = "" if rows == 1 else f"_r{r}_c{c}"
                    accumulator_after = Signal(element_shape, name=f"model{where}_after_row{row}")
                    m.d.comb += accumulator_after.eq(Mux(view.clear, 0, accumulator[r, c]) + products)
                    result_after = Signal(element_shape, name=f"expected{where}_after_row{row}")
                    m.d.comb += result_after.eq(result[r, c])
                    with m.If(ours & view.read):
                        m.d.comb += result_after.eq(accumulator_after)
                    accumulator[r, c], result[r, c] = accumulator_after, result_after
            index_after = Signal(bits, name=f"reads_after_row{row}")
            m.d.comb += index_after.eq(index + view.read)
            index, count, closed = index_after, count_after, closed_after
        with m.If(take):
            m.d.sync += [reads_in.eq(index), entered_all.eq(closed),
                         *(entered[r].eq(count[r]) for r in range(rows))]
            if self._models_sums():
                m.d.sync += [*(model[key].eq(accumulator[key]) for key in pes),
                             *(expected[key].eq(result[key]) for key in pes)]

        # Multiplier side: the lanes selected for each dot product, as they enter the multipliers (per scheduler
        # row: the columns of a tile's row multiply the lanes its scheduler selected).
        moving = enable & internal["valid"]
        reads_multiplied = Signal(bits)   # read rows past the multipliers: the dot product being multiplied
        multiplied = [Signal(pair_bits, name=per_row("multiplied").format(r)) for r in range(rows)]
        multiplied_all = Signal()
        ours = reads_multiplied == self.tag
        closing = moving & ours & internal["read"]
        multiplied_now = []
        for r in range(rows):
            active = internal["active"][r]
            now = Signal(pair_bits, name=per_row("multiplied_now").format(r))
            m.d.comb += now.eq(multiplied[r] + Value.cast(ours & moving) * _count_bits(active, pair_bits))
            multiplied_now.append(now)
        with m.If(enable):
            m.d.sync += [multiplied[r].eq(multiplied_now[r]) for r in range(rows)]
            with m.If(moving & internal["read"]):
                m.d.sync += reads_multiplied.eq(reads_multiplied + 1)
            with m.If(closing):
                m.d.sync += multiplied_all.eq(1)
        with m.If(closing):
            check("counts", entered_all, "the products of a dot product reach the multipliers before its read row "
                                         "entered")
            for r in range(rows):
                check("counts", multiplied_now[r] == entered[r], "the products multiplied for a dot product are "
                                                                 "not its effectual pairs" + _in_row(r, rows))
        with m.If(~internal["valid"]):
            for r in range(rows):
                check("counts", internal["active"][r] == 0, "a lane is selected in a cycle that multiplies nothing"
                                                            + _in_row(r, rows))

        # Output side: the tagged result. The ghost counters count modulo 2**count_bits (k-induction starts them
        # anywhere); the lemmas bound the dot products in flight below that, so "reads entered minus results left"
        # is the number in flight.
        results_out = Signal(bits)
        leave = pe.o_sum.valid & self.o_ready
        reads_not_out = Signal(bits)
        m.d.comb += reads_not_out.eq(reads_in - results_out)
        with m.If(leave):
            m.d.sync += results_out.eq(results_out + 1)
            check("order", reads_not_out != 0, "a result left without its read row")
            with m.If(results_out == self.tag):
                check("order", multiplied_all, "a result left before its products were multiplied")
                for r, c in pes:
                    check("sums", pe.result(pe.o_sum.payload, r, c) == expected[r, c],
                          "a result is not the accumulation of its dot product's pairs"
                          + ("" if rows == 1 else f" (PE {r}, {c})"))
        m.d.comb += Cover(leave & (results_out == self.tag) & (self.tag == 1) & (entered[-1] > 1))
        if "lemmas" in self.properties:
            self._lemmas(m, fragment, internal, reads_in=reads_in, entered=entered, entered_all=entered_all,
                         reads_multiplied=reads_multiplied, multiplied=multiplied, multiplied_all=multiplied_all,
                         results_out=results_out, model=model, expected=expected)
        return m

    def _models_sums(self):
        """Whether the ghost dense accumulator and the tagged result are built (for ``sums`` or ``sum_lemmas``)."""
        return "sums" in self.properties or "sum_lemmas" in self.properties

    def _lemmas(self, m, fragment, internal, *, reads_in, entered, entered_all, reads_multiplied, multiplied,
                multiplied_all, results_out, model, expected):
        """Assert what ties the ghost counters to the PE's state: the induction proves these too.

        Each row inside the PE belongs to the dot product numbered by the read rows ahead of it, counted
        back from ``reads_multiplied`` (the dot product at the last operand stage): each operand stage and the
        schedule stage is one further if the stage after it holds a read row, the head of the window one further
        if the schedule stage does, and each window or queue row one further per read row before it. Per
        scheduler row, the tagged dot product's effectual pairs entered are those multiplied plus those inside
        (the operand and schedule stages' selected lanes, the window's pending pairs, the queue's effectual
        pairs), modulo ``2**pair_bits`` (dot products modulo ``2**count_bits``); its read row has entered if the
        tag is among the dot products between the last operand stage and the input, and its products were
        multiplied if it is among those between the output and that stage. In a tile (several scheduler rows)
        each row's copy of ``visible`` equals the shared one, and the stages' selections are per row.
        """
        pe = self.core
        depth, bits, pair_bits, tag, rows = pe.depth, self.count_bits, self.pair_bits, self.tag, pe.rows
        stages_before = self.operand_stages - 1
        ring = spec.GROUP_REGISTERS * depth
        queue_rows = ring + depth
        mac_stages = pe.mac_unit.multiply_stages + pe.mac_unit.tree_stages - 1
        names = (*_buffer_signals(depth, queue_rows, rows, self.operand_stages),
                 *(f"mac_{flag}_{stage}" for flag in ("valid", "read") for stage in range(mac_stages)))
        state = _signals_named(fragment, names)
        stages = [sub for sub, name, _ in fragment.subfragments if name == "result_stage"]
        if stages:
            state.update(_signals_named(stages[0], RESULT_STAGE_SIGNALS))
        missing = set(names) - set(state) | set(RESULT_STAGE_SIGNALS) - set(state)
        if missing:
            raise ParameterError(f"the design under proof has no signals {sorted(missing)} (the lemmas read them)")

        def lemma(condition, message):
            m.d.comb += Assert(condition, f"lemma: {message}", src_loc_at=1)

        def named(value, name):
            signal = Signal(bits, name=name)
            m.d.comb += signal.eq(value)
            return signal

        # The buffer's counts, the residue of the row after the last (a taken group's row 0 lands there), the
        # lazy queue's last shift (one-hot) and its tail (a thermometer code of where the rows end).
        window_count, waiting = state["window_count"], state["waiting"]
        lemma(window_count <= depth, "more rows in the window than it holds")
        lemma(waiting <= ring, "more rows waiting than the group registers hold")
        lemma((state["head_slot"] + window_count + waiting) % depth == 0,
              "the rows inside do not end at a group boundary")
        last_shift = state["last_shift_is"]
        lemma(sum(last_shift[step] for step in range(depth + 1)) == 1, "the queue's last shift is not one-hot")
        for k in range(queue_rows):
            lemma(state[f"tail_at_or_before_now{k}"] == (window_count + waiting <= k),
                  f"the queue's tail code at {k} is not 'the rows inside end at or before {k}'")

        # Visible rows: present, after no read row, at or before no clear row (the head excepted). A tile's rows
        # schedule from their own copies (register replicas): each equals the shared one.
        read_before, clear_seen = Const(0), Const(0)
        for d in range(depth):
            if d:
                clear_seen = clear_seen | state[f"clear_d{d}"]
            lemma(state["visible"][d] == ((window_count > d) & ~read_before & ~clear_seen),
                  f"window row {d}'s visibility is not its rows' flags")
            read_before = read_before | state[f"read_d{d}"]
        if rows > 1:
            for r in range(rows):
                lemma(state[f"visible_r{r}"] == state["visible"], f"row {r}'s copy of the visible rows differs")

        # Stages that hold no row select no lane; the output stage's skid register is full only behind a full
        # output register.
        scheduled_valid, scheduled_read = state["scheduled_valid_0"], state["scheduled_read_0"]
        for r in range(rows):
            lemma(scheduled_valid | (state[f"select_active_r{r}"] == 0),
                  "a lane is selected in an empty schedule stage" + _in_row(r, rows))
            for stage in range(stages_before):
                lemma(state[f"operands_valid_{stage}"] | (state[f"operands_active_r{r}_{stage}"] == 0),
                      f"a lane is selected in empty operand stage {stage}" + _in_row(r, rows))
        lemma(~state["skid_valid"] | state["output_valid"], "the output stage's skid register is full behind an "
                                                             "empty output")

        # The dot product of each row inside, from the last operand stage's back to the input: per stage its
        # dot product, valid flag and each scheduler row's selected lanes.
        stage_rows = [(reads_multiplied, internal["valid"], internal["read"], internal["active"])]
        for stage in reversed(range(stages_before)):
            after_id, after_valid, after_read, _ = stage_rows[-1]
            stage_rows.append((named(after_id + (after_valid & after_read), f"lemma_operands{stage}_dot_product"),
                               state[f"operands_valid_{stage}"], state[f"operands_read_{stage}"],
                               [state[f"operands_active_r{r}_{stage}"] for r in range(rows)]))
        after_id, after_valid, after_read, _ = stage_rows[-1]
        scheduled_id = named(after_id + (after_valid & after_read), "lemma_scheduled_dot_product")
        stage_rows.append((scheduled_id, scheduled_valid, scheduled_read,
                           [state[f"select_active_r{r}"] for r in range(rows)]))
        head_id = named(scheduled_id + (scheduled_valid & scheduled_read), "lemma_head_dot_product")
        pairs = [Const(0) for _ in range(rows)]
        for stage_id, stage_valid, _, actives in stage_rows:
            for r in range(rows):
                pairs[r] = pairs[r] + Mux(stage_valid & (stage_id == tag), _count_bits(actives[r], pair_bits), 0)
        reads_inside = Const(0, bits)
        rows_inside = []  # per queue row: present, in the window, its dot product, its flags (for the sum lemmas)
        for k in range(queue_rows):
            queued = pe.flag_layout(state[f"queue_now{k}"])
            read, clear, in_window = queued.read, queued.clear, Const(0)
            effectual = [queued.effectual[r] for r in range(rows)]
            if k < depth:
                in_window = window_count > k
                effectual = [Mux(in_window, state[f"pending_r{r}_d{k}"], effectual[r]) for r in range(rows)]
                read = Mux(in_window, state[f"read_d{k}"], read)
                clear = Mux(in_window, state[f"clear_d{k}"], clear)
            present = window_count + waiting > k
            row_id = named(head_id + reads_inside, f"lemma_row{k}_dot_product")
            rows_inside.append({"present": present, "in_window": in_window, "id": row_id, "read": read,
                                "clear": clear, "effectual": effectual})
            for r in range(rows):
                pairs[r] = pairs[r] + Mux(present & (row_id == tag), _count_bits(effectual[r], pair_bits), 0)
            reads_inside = (reads_inside + (present & read))[:bits]
        lemma(reads_in == (head_id + reads_inside)[:bits], "the read rows entered are not those inside and past "
                                                           "the operand stage")
        for r in range(rows if "counts" in self.properties else 0):  # what the counts rest on, and only they
            lemma(entered[r] == (multiplied[r] + pairs[r])[:pair_bits], "the tagged dot product's pairs entered are "
                                                                        "not those multiplied and those inside"
                                                                        + _in_row(r, rows))
        lemma(((tag - reads_multiplied)[:bits] >= (reads_in - reads_multiplied)[:bits]) | entered_all,
              "the tagged read row is inside, but not marked entered")

        # Read rows past the operand stage: in the multiplier and reduction stages, the accumulator's row
        # register and the output stage, or gone.
        flags_after = [state[f"mac_valid_{stage}"] & state[f"mac_read_{stage}"] for stage in range(mac_stages)]
        reads_after = sum(flags_after) + (state["accumulate_row_valid"] & state["accumulate_row_read"]) \
            + state["output_valid"] + state["skid_valid"]
        lemma(reads_multiplied == (results_out + reads_after)[:bits], "the read rows past the operand stage are not "
                                                                      "those in the MAC and the results left")
        lemma(((tag - results_out)[:bits] >= (reads_multiplied - results_out)[:bits]) | multiplied_all,
              "the tagged result is in the MAC, but its products are not marked multiplied")
        if "sum_lemmas" in self.properties:
            self._sum_lemmas(m, fragment, state, lemma, named, model=model[0, 0], expected=expected[0, 0],
                             results_out=results_out, stage_rows=stage_rows, rows_inside=rows_inside)

    def _sum_lemmas(self, m, fragment, state, lemma, named, *, model, expected, results_out, stage_rows, rows_inside):
        """Assert what ties the ghost dense accumulator and the tagged result to the PE's data: the induction of
        ``sums`` proves these too.

        The pairs lemma with values. Every place that holds pairs not yet accumulated, from the oldest to the
        newest, has a value (the sum of ``a * b`` over its pairs) and a ``clear`` flag: the lane sum register
        (the accumulator's row register's flags), the product registers, the multipliers' operand registers
        (the MAC stages' flags), the operand stage's registered operands of its selected lanes, the schedule
        stage's selected lanes (their operands as the sparse muxes read them from the window's data, which
        follows the window's flags one cycle later), each window row's pending pairs and each queue row's
        effectual pairs (their data in the window row of their slot, or in the group register a window row is
        loading from, or in the group register of their ring position). Folding those values onto the PE's
        accumulator, a ``clear`` restarting the fold, gives at each place the dense accumulation through it,
        modulo ``2**acc_width``:

        - through the newest place, it is the ghost dense accumulator of the rows entered;
        - through the place of the tagged ``read`` row (its dot product counted as in :meth:`_lemmas`: back
          from the operand stage and forward from the results left), it is the tagged expected result;
        - a tagged result in the output stage (its output or skid register) is the expected result.

        The fold is exact because the scheduler takes pairs only from visible rows (the visibility lemma): no
        place before a window row holds pairs of a row after a ``read`` row, or at or after a ``clear`` row,
        that is still in the window. Lemmas of the buffer's addressing go with it: the next row to load is in
        the ring of group registers (``load_ring < 3 * depth``), at the residue after the window's rows; a window
        row loading from a group register names one of the three (the register's Default arm would read the
        last, which the group registers' write guard does not wait for); the head slot is inside the window.
        """
        pe = self.core
        depth, lanes, bits = pe.depth, pe.lanes, self.count_bits
        groups = spec.GROUP_REGISTERS
        ring = groups * depth
        shape = pe.result_shape
        names = ("load_ring", "head_slot", "window_count", "waiting", "select_head",
                 "accumulator_r0_c0_accumulator", "reduce_r0_c0_sum",
                 *(f"{flag}_{stage}" for flag in ("mac_valid", "mac_clear", "mac_read") for stage in range(2)),
                 "accumulate_row_valid", "accumulate_row_clear", "accumulate_row_read",
                 "operands_valid_0", "operands_clear_0", "operands_read_0", "operands_active_r0_0",
                 "scheduled_valid_0", "scheduled_clear_0", "scheduled_read_0", "select_active_r0",
                 *(f"window_row{p}" for p in range(depth)), *(f"data_load{p}" for p in range(depth)),
                 *(f"data_group{p}" for p in range(depth)),
                 *(f"group{g}_row{p}" for g in range(groups) for p in range(depth)),
                 *(f"{name}{lane}" for name in ("a_r0_c0_l", "b_r0_l") for lane in range(lanes)),
                 *(f"{name}{lane}_operand_0" for name in ("a_r0_c0_l", "b_r0_l") for lane in range(lanes)),
                 *(f"mul_r0_c0_l{lane}_product" for lane in range(lanes)))
        found = _signals_named(fragment, names)
        registered = {}
        for sub, name, _ in fragment.subfragments:
            if name == "result_stage":
                found.update(_signals_named(sub, ("output_payload", "skid_payload")))
            elif name in {f"mul_r0_c0_l{lane}" for lane in range(lanes)}:
                registered[name] = _signals_named(sub, ("a_registered", "b_registered"))
        missing = (set(names) | {"output_payload", "skid_payload"}) - set(found)
        missing |= {f"mul_r0_c0_l{lane}" for lane in range(lanes)
                    if set(registered.get(f"mul_r0_c0_l{lane}", {})) != {"a_registered", "b_registered"}}
        if missing:
            raise ParameterError(f"the design under proof has no signals {sorted(missing)} (the sum lemmas read "
                                 f"them)")

        def row(name):
            return data.View(pe.row_layout, found[name])

        def pairs_value(view, mask):
            """The sum of ``a * b`` over the lanes of ``mask`` in stream row ``view``."""
            a, b = self.operands(view, 0, 0)
            return sum(Mux(mask[lane], a[lane] * b[lane], 0) for lane in range(lanes))

        def chosen(index, values, name, layout):
            """``values[index]``, the last value for an index past the end (as the PE's Default arms)."""
            picked = Signal(layout, name=name)
            with m.Switch(index):
                for number, value in enumerate(values):
                    with m.Case(number) if number < len(values) - 1 else m.Default():
                        m.d.comb += picked.eq(value)
            return picked

        def group_row(g, p):
            return found[f"group{g}_row{p}"]

        # The buffer's addressing: the next row to load is inside the ring, at the residue after the window's rows.
        load_ring, head_slot, window_count = found["load_ring"], found["head_slot"], found["window_count"]
        lemma(load_ring < ring, "the next row to load is past the group registers")
        lemma(head_slot < depth, "the head is past the window")
        lemma((load_ring + 2 * depth - head_slot - window_count) % depth == 0,
              "the next row to load is not at the residue after the window's rows")

        # The data of each window slot: in the window row, or in the group register it loads from this cycle (the
        # one the group registers' writes wait for while the pipeline stops).
        slot_data = []
        for p in range(depth):
            lemma(found[f"data_group{p}"] < groups, f"window row {p} loads from past the group registers")
            loading = chosen(found[f"data_group{p}"], [group_row(g, p) for g in range(groups)],
                             f"lemma_slot{p}_loading", len(found[f"window_row{p}"]))
            value = Signal(len(found[f"window_row{p}"]), name=f"lemma_slot{p}_data")
            m.d.comb += value.eq(Mux(found[f"data_load{p}"], loading, found[f"window_row{p}"]))
            slot_data.append(value)
        ring_data = [group_row(position // depth, position % depth) for position in range(ring)]

        # The places, oldest first: (name, valid, clear, read, dot product, value).
        places = []
        reads_before = results_out + state["output_valid"] + state["skid_valid"]
        accumulate_id = named(reads_before, "lemma_accumulate_dot_product")
        places.append(("accumulate", found["accumulate_row_valid"], found["accumulate_row_clear"],
                       found["accumulate_row_read"], accumulate_id, found["reduce_r0_c0_sum"]))
        previous = places[-1]
        product_id = named(previous[4] + (previous[1] & previous[3]), "lemma_products_dot_product")
        places.append(("products", found["mac_valid_1"], found["mac_clear_1"], found["mac_read_1"], product_id,
                       sum(found[f"mul_r0_c0_l{lane}_product"] for lane in range(lanes))))
        previous = places[-1]
        multiplier_id = named(previous[4] + (previous[1] & previous[3]), "lemma_multipliers_dot_product")
        places.append(("multipliers", found["mac_valid_0"], found["mac_clear_0"], found["mac_read_0"], multiplier_id,
                       sum(registered[f"mul_r0_c0_l{lane}"]["a_registered"]
                           * registered[f"mul_r0_c0_l{lane}"]["b_registered"] for lane in range(lanes))))
        operands_id = stage_rows[0][0]
        active = found["operands_active_r0_0"]
        places.append(("operands", found["operands_valid_0"], found["operands_clear_0"], found["operands_read_0"],
                       operands_id, sum(Mux(active[lane], found[f"a_r0_c0_l{lane}_operand_0"]
                                            * found[f"b_r0_l{lane}_operand_0"], 0) for lane in range(lanes))))
        scheduled_id = stage_rows[-1][0]
        active = found["select_active_r0"]
        places.append(("scheduled", found["scheduled_valid_0"], found["scheduled_clear_0"], found["scheduled_read_0"],
                       scheduled_id, sum(Mux(active[lane], found[f"a_r0_c0_l{lane}"] * found[f"b_r0_l{lane}"], 0)
                                         for lane in range(lanes))))
        for k, inside in enumerate(rows_inside):
            # Queue row k waits at ring position load_ring + (k - window_count) (one wrap: fewer than ring wait).
            offset = Signal(range(-depth - 1, 2 * ring + depth), name=f"lemma_row{k}_ring_offset")
            m.d.comb += offset.eq(load_ring + k - window_count)
            position = Signal(range(-depth - 1, 2 * ring + depth), name=f"lemma_row{k}_ring_position")
            m.d.comb += position.eq(Mux(offset >= ring, offset - ring, offset))
            waiting_data = chosen(position.as_unsigned()[:len(load_ring)], ring_data, f"lemma_row{k}_waiting_data",
                                  len(ring_data[0]))
            if k < depth:
                window_data = chosen(head_slot, [slot_data[(head + k) % depth] for head in range(depth)],
                                     f"lemma_row{k}_window_data", len(slot_data[0]))
                row_data = Mux(inside["in_window"], window_data, waiting_data)
            else:
                row_data = waiting_data
            row_value = Signal(len(row_data), name=f"lemma_row{k}_data")
            m.d.comb += row_value.eq(row_data)
            places.append((f"row{k}", inside["present"], inside["clear"], inside["read"], inside["id"],
                           pairs_value(data.View(pe.row_layout, row_value), inside["effectual"][0])))

        # The fold: the dense accumulation through each place, on the accumulator's value.
        through = found["accumulator_r0_c0_accumulator"]
        for name, valid, clear, read, dot_product, value in places:
            after = Signal(shape, name=f"lemma_sum_through_{name}")
            m.d.comb += after.eq(Mux(valid & clear, value, through + Mux(valid, value, 0)))
            through = after
            lemma(~(valid & read & (dot_product == self.tag)) | (through == expected),
                  f"the tagged read row is at {name}, but the accumulation through it is not the expected result")
        lemma(model == through, "the dense accumulation of the rows entered is not that of the accumulator and the "
                                "pairs inside")
        lemma(~(state["output_valid"] & (results_out == self.tag)) | (found["output_payload"] == expected),
              "the tagged result is in the output register, but not the expected result")
        lemma(~(state["skid_valid"] & ((results_out + 1)[:bits] == self.tag)) | (found["skid_payload"] == expected),
              "the tagged result is in the skid register, but not the expected result")
