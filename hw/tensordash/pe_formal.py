"""Formal wrapper of the TensorDash PE: every effectual pair multiplied once, in its own dot product."""
from amaranth import Elaboratable, Module, Mux, ResetSignal, Signal, Value
from amaranth.hdl import Assert, Assume, Cover, Fragment

from ...errors import ParameterError
from .pe import TDPE

__all__ = ["PROPERTIES", "PEDotProductProperties"]

#: The groups of properties, each asserted unless left out (a test breaks one at a time): ``counts`` (the
#: effectual pairs entering a dot product are as many as the products multiplied for it, counted from the
#: scheduler's selections when they reach the multipliers), ``sums`` (each result is the accumulation of the
#: products of its own rows, from free operand values) and ``order`` (no result without its read row, none
#: before its products were multiplied).
PROPERTIES = ("counts", "sums", "order")

#: Registers of :class:`~trainforge.hw.tensordash.core.TDSparseCore` that the wrapper reads, found by name in the
#: elaborated PE: the operand stage's lane selections, valid and read flags, and the pipeline's clock enable.
INTERNAL_SIGNALS = ("operands_active_r0_0", "operands_valid_0", "operands_read_0", "enable")


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

    Parameters
    ----------
    pe : TDPE, optional
        The PE under proof (a deliberately broken one shows that the proof can fail); by default
        ``TDPE(**params)``.
    properties : sequence of str
        The groups of :data:`PROPERTIES` to assert (all by default).
    **params
        ``td_pe`` parameters (integer MAC, ``mode="both"``).

    Attributes
    ----------
    ports : list of Value
        The free inputs of the wrapper.
    """

    def __init__(self, pe=None, properties=PROPERTIES, count_bits=6, **params):
        unknown = set(properties) - set(PROPERTIES)
        if unknown:
            raise ParameterError(f"unknown PE properties {sorted(unknown)}; known: {', '.join(PROPERTIES)}")
        self.properties = tuple(properties)
        self.pe = TDPE(**params) if pe is None else pe
        if self.pe.params["mac"] != "integer" or self.pe.params["mode"] != "both":
            raise ParameterError(f"the PE proof takes mac='integer' and mode='both', not "
                                 f"mac={self.pe.params['mac']!r}, mode={self.pe.params['mode']!r}")
        self.count_bits = count_bits
        self.i_valid = Signal()
        self.i_payload = Signal(len(Value.cast(self.pe.i_group.payload)))
        self.o_ready = Signal()
        self.tag = Signal(count_bits)
        self.ports = [self.i_valid, self.i_payload, self.o_ready, self.tag]

    def elaborate(self, platform):
        m = Module()
        pe = self.pe
        lanes, depth, bits = pe.lanes, pe.depth, self.count_bits
        result_shape = pe.result_shape

        def check(group, condition, message):
            # src_loc_at=1: a failure names the line that called check(), not this one.
            if group in self.properties:
                m.d.comb += Assert(condition, message, src_loc_at=1)

        fragment = Fragment.get(pe, platform)
        internal = {}
        for statements in fragment.statements.values():
            for statement in statements:
                for signal in statement._lhs_signals():
                    # Several signals are named "enable" (the multipliers' copies of the PE's): all equal it.
                    if signal.name in INTERNAL_SIGNALS:
                        internal.setdefault(signal.name, signal)
        missing = set(INTERNAL_SIGNALS) - set(internal)
        if missing:
            raise ParameterError(f"the PE under proof has no signals {sorted(missing)}")
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

        # Input side: the dot product of each row (reads before it), its effectual pairs and the dense PE's
        # accumulator, row by row through a taken group.
        reads_in = Signal(bits)           # read rows entered: the index of the dot product the next row is in
        entered = Signal(bits)            # effectual pairs of the tagged dot product entered so far
        entered_all = Signal()            # its read row has entered
        model = Signal(result_shape)      # the dense PE's accumulator after the rows entered
        expected = Signal(result_shape)   # the tagged dot product's result
        take = self.i_valid & pe.i_group.ready
        index, count, accumulator, closed, result = reads_in, entered, model, entered_all, expected
        for row in range(depth):
            view = pe.i_group.payload[row]
            effectual = [(view.a[lane] != 0) & (view.b[lane] != 0) for lane in range(lanes)]
            products = sum(view.a[lane] * view.b[lane] for lane in range(lanes))
            ours = index == self.tag
            accumulator_after = Signal(result_shape, name=f"model_after_row{row}")
            m.d.comb += accumulator_after.eq(Mux(view.clear, 0, accumulator) + products)
            count_after = Signal(bits, name=f"entered_after_row{row}")
            m.d.comb += count_after.eq(count + (ours * _count_bits(effectual, bits)))
            closed_after = Signal(name=f"entered_all_after_row{row}")
            result_after = Signal(result_shape, name=f"expected_after_row{row}")
            m.d.comb += [closed_after.eq(closed | (ours & view.read)),
                         result_after.eq(result)]
            with m.If(ours & view.read):
                m.d.comb += result_after.eq(accumulator_after)
            index_after = Signal(bits, name=f"reads_after_row{row}")
            m.d.comb += index_after.eq(index + view.read)
            index, count, accumulator, closed, result = (index_after, count_after, accumulator_after,
                                                         closed_after, result_after)
        with m.If(take):
            m.d.sync += [reads_in.eq(index), entered.eq(count), model.eq(accumulator),
                         entered_all.eq(closed), expected.eq(result)]

        # Multiplier side: the lanes selected for each dot product, as they enter the multipliers.
        active = internal["operands_active_r0_0"]
        moving = enable & internal["operands_valid_0"]
        reads_multiplied = Signal(bits)   # read rows past the multipliers: the dot product being multiplied
        multiplied = Signal(bits)         # products of the tagged dot product multiplied so far
        multiplied_all = Signal()
        ours = reads_multiplied == self.tag
        multiplied_now = Signal(bits)
        m.d.comb += multiplied_now.eq(multiplied + Value.cast(ours & moving) * _count_bits(active, bits))
        closing = moving & ours & internal["operands_read_0"]
        with m.If(enable):
            m.d.sync += multiplied.eq(multiplied_now)
            with m.If(moving & internal["operands_read_0"]):
                m.d.sync += reads_multiplied.eq(reads_multiplied + 1)
            with m.If(closing):
                m.d.sync += multiplied_all.eq(1)
        with m.If(closing):
            check("counts", entered_all, "the products of a dot product reach the multipliers before its read row "
                                         "entered")
            check("counts", multiplied_now == entered, "the products multiplied for a dot product are not its "
                                                       "effectual pairs")
        with m.If(~internal["operands_valid_0"]):
            check("counts", active == 0, "a lane is selected in a cycle that multiplies nothing")

        # Output side: the tagged result.
        results_out = Signal(bits)
        leave = pe.o_sum.valid & self.o_ready
        with m.If(leave):
            m.d.sync += results_out.eq(results_out + 1)
            check("order", results_out < reads_in, "a result left without its read row")
            with m.If(results_out == self.tag):
                check("order", multiplied_all, "a result left before its products were multiplied")
                check("sums", pe.o_sum.payload == expected, "a result is not the accumulation of its dot "
                                                            "product's pairs")
        m.d.comb += Cover(leave & (results_out == self.tag) & (self.tag == 1) & (entered > 1))
        return m
