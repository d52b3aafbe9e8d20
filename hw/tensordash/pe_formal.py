"""Formal wrapper of the TensorDash PE (and of the tile, per PE row): every effectual pair multiplied once, in its own
dot product."""
from amaranth import Const, Elaboratable, Module, Mux, ResetSignal, Signal, Value
from amaranth.hdl import Assert, Assume, Cover, Fragment

from ...errors import ParameterError
from ...spec import tensordash as spec
from .pe import TDPE

__all__ = ["PROPERTIES", "PEDotProductProperties"]

#: The groups of properties, each asserted unless left out (a test breaks one at a time): ``counts`` (the
#: effectual pairs entering a dot product are as many as the products multiplied for it, counted from the
#: scheduler's selections when they reach the multipliers), ``sums`` (each result is the accumulation of the
#: products of its own rows, from free operand values), ``order`` (no result without its read row, none
#: before its products were multiplied) and ``lemmas`` (the ghost counters against the PE's staging buffer,
#: queue and pipeline: what makes the k-induction of ``counts`` and ``order`` go through).
PROPERTIES = ("counts", "sums", "order", "lemmas")

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
    multiplied twice still shows).

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
            if "sums" in self.properties:
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
            if "sums" in self.properties:
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
                         results_out=results_out)
        return m

    def _lemmas(self, m, fragment, internal, *, reads_in, entered, entered_all, reads_multiplied, multiplied,
                multiplied_all, results_out):
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
        for k in range(queue_rows):
            queued = pe.flag_layout(state[f"queue_now{k}"])
            read = queued.read
            effectual = [queued.effectual[r] for r in range(rows)]
            if k < depth:
                in_window = window_count > k
                effectual = [Mux(in_window, state[f"pending_r{r}_d{k}"], effectual[r]) for r in range(rows)]
                read = Mux(in_window, state[f"read_d{k}"], read)
            present = window_count + waiting > k
            row_id = named(head_id + reads_inside, f"lemma_row{k}_dot_product")
            for r in range(rows):
                pairs[r] = pairs[r] + Mux(present & (row_id == tag), _count_bits(effectual[r], pair_bits), 0)
            reads_inside = (reads_inside + (present & read))[:bits]
        lemma(reads_in == (head_id + reads_inside)[:bits], "the read rows entered are not those inside and past "
                                                           "the operand stage")
        for r in range(rows):
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
