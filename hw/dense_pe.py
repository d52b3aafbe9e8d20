"""Dense baseline processing element (TensorDash, Fig. 2)."""
from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .mac import MAC_UNITS
from .stream_stage import StreamStage
from ..spec import dense_pe as spec

__all__ = ["DensePE"]


class DensePE(wiring.Component):
    """A Tensorcore-style PE: L multipliers whose products all accumulate into one output every cycle.

    Each accepted row carries ``lanes`` operand pairs ``(a[k], b[k])``. The PE
    adds ``sum_k a[k] * b[k]`` to its accumulator with the MAC unit ``mac``
    (:mod:`trainforge.hw.mac`): integer operands with an accumulator that
    wraps around modulo ``2 ** acc_width``, or FP16 / bfloat16 operands with
    exact FP32 products, a pairwise FP32 adder tree and an FP32 accumulator.
    Two flags on the row make up the command set:

    - ``clear``: the accumulator starts from zero for this row (the row's own
      products are still added), so ``clear`` opens a new dot product;
    - ``read``: once this row is accumulated, the new accumulator value is sent
      on ``o_sum``; ``read`` closes a dot product.

    A row with both flags is a one-row dot product; a zero row with ``clear``
    just clears. The datapath is a pipeline: operand registers, the MAC's
    multiplier stages, its lane-reduction stages, then the accumulator, whose
    new value a ``read`` row hands to the shared
    :class:`~trainforge.hw.stream_stage.StreamStage` in front of ``o_sum``. It
    accepts one row every cycle while ``o_sum`` is not stalled, and a
    ``read`` row's result is valid :func:`~trainforge.spec.dense_pe.latency`
    cycles after the row was accepted. The whole pipeline moves on one clock
    enable made of registers only (the output stage's registered ready and the
    last stage's valid and read flags): it stalls only when a ``read`` row
    reaches the accumulator while the output stage is full, so
    ``i_row.ready`` does not depend combinationally on ``o_sum.ready``.

    Parameters
    ----------
    lanes : int
        Number of multiplier lanes L.
    width : int
        Operand width in bits (both ``a`` and ``b``); integer MAC only.
    acc_width : int
        Accumulator and result width in bits; integer MAC only.
    signed : bool
        Operands and result are two's complement when true, unsigned
        otherwise; integer MAC only.
    mac : str
        MAC unit: ``"integer"``, ``"fp16"`` or ``"bf16"``
        (:data:`trainforge.spec.mac.MAC`). The FP units take 16-bit operand bit
        patterns and give FP32 bit patterns.

    Members
    -------
    i_row : In(stream.Signature(row_layout))
        Rows of operand pairs with the ``clear`` and ``read`` flags.
    o_sum : Out(stream.Signature(result_shape))
        Accumulated dot products, one for each ``read`` row.

    Attributes
    ----------
    row_layout : data.StructLayout
        Payload layout of ``i_row``: ``a`` and ``b`` arrays of ``lanes``
        operands, then the ``clear`` and ``read`` bits.
    result_shape : Shape
        ``signed(acc_width)`` or ``unsigned(acc_width)``; ``unsigned(32)`` for the FP units.
    latency : int
        Cycles from a ``read`` row's acceptance to its result, without stalls.
    """

    PARAMS = spec.PARAMS

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.is_signed = self.signed
        self.unit = MAC_UNITS[self.mac](self.params)
        self.operand_shape = spec.operand_shape(self.params)
        self.result_shape = spec.result_shape(self.params)
        self.row_layout = spec.row_layout(self.params)
        self.latency = spec.latency(self.params)
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_sum": Out(stream.Signature(self.result_shape)),
        })

    def elaborate(self, platform):
        m = Module()
        unit = self.unit

        m.submodules.output_stage = output_stage = StreamStage(self.result_shape)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_sum))

        # Valid and flag registers beside the datapath: the operand register, then one per stage of the
        # multiplier and the lane reduction but the last (the accumulator registers the flags of its row).
        depth = unit.multiply_stages + unit.tree_stages
        valid = [Signal(name=f"valid_{index}") for index in range(depth)]
        clear = [Signal(name=f"clear_{index}") for index in range(depth)]
        read = [Signal(name=f"read_{index}") for index in range(depth)]
        enable = Signal()
        result_valid = Signal()
        m.d.comb += [
            # Registers only: the stage's ready is a register, so nothing runs from o_sum.ready to i_row.ready.
            enable.eq(~result_valid | output_stage.i_stream.ready),
            self.i_row.ready.eq(enable),
        ]
        with m.If(enable):
            m.d.sync += [
                valid[0].eq(self.i_row.valid),
                clear[0].eq(self.i_row.payload.clear),
                read[0].eq(self.i_row.payload.read),
            ]
            for index in range(1, depth):
                m.d.sync += [valid[index].eq(valid[index - 1]), clear[index].eq(clear[index - 1]),
                             read[index].eq(read[index - 1])]

        # Operand registers, then the MAC's multipliers and lane reduction.
        a = [Signal(self.operand_shape, name=f"a_{lane}") for lane in range(self.lanes)]
        b = [Signal(self.operand_shape, name=f"b_{lane}") for lane in range(self.lanes)]
        with m.If(enable):
            for lane in range(self.lanes):
                m.d.sync += [a[lane].eq(self.i_row.payload.a[lane]), b[lane].eq(self.i_row.payload.b[lane])]
        products = [unit.multiply(m, a[lane], b[lane], 1, enable, f"lane{lane}") for lane in range(self.lanes)]
        row_sum = unit.reduce(m, products, enable, "tree")

        # The accumulator: a read row's result goes to the output stage.
        accumulator = unit.accumulator(m, valid[-1], clear[-1], read[-1], enable, "accumulate")
        m.d.comb += [
            result_valid.eq(accumulator.result_valid),
            output_stage.i_stream.payload.eq(accumulator.add(row_sum, "accumulator")),
            output_stage.i_stream.valid.eq(result_valid),
        ]

        return m
