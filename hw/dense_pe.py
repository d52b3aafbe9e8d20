"""Dense baseline processing element (TensorDash, Fig. 2)."""
from amaranth import Module, Signal, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .adder_tree import adder_tree
from .stream_stage import StreamStage
from ..spec import dense_pe as spec

__all__ = ["DensePE"]


class DensePE(wiring.Component):
    """A Tensorcore-style PE: L multipliers whose products all accumulate into one output every cycle.

    Each accepted row carries ``lanes`` operand pairs ``(a[k], b[k])``. The PE
    adds ``sum_k a[k] * b[k]`` to its accumulator, which wraps around modulo
    ``2 ** acc_width``. Two flags on the row make up the command set:

    - ``clear``: the accumulator starts from zero for this row (the row's own
      products are still added), so ``clear`` opens a new dot product;
    - ``read``: once this row is accumulated, the new accumulator value is sent
      on ``o_sum``; ``read`` closes a dot product.

    A row with both flags is a one-row dot product; a zero row with ``clear``
    just clears. The datapath is a two-stage pipeline (multiply, then reduce
    and accumulate): it accepts one row every cycle while ``o_sum`` is not
    stalled, and a ``read`` row's result is valid :attr:`LATENCY` cycles after
    the row was accepted. Results leave through the shared
    :class:`~trainforge.hw.stream_stage.StreamStage`, which holds up to two
    results; the PE stalls its input only when a ``read`` row finds the stage
    full. Its ``ready`` is a register, so ``i_row.ready`` does not depend
    combinationally on ``o_sum.ready``.

    Parameters
    ----------
    lanes : int
        Number of multiplier lanes L.
    width : int
        Operand width in bits (both ``a`` and ``b``).
    acc_width : int
        Accumulator and result width in bits.
    signed : bool
        Operands and result are two's complement when true, unsigned otherwise.

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
        ``signed(acc_width)`` or ``unsigned(acc_width)``.
    """

    PARAMS = spec.PARAMS

    #: Cycles from the acceptance of a ``read`` row to its result on ``o_sum``, without stalls.
    LATENCY = spec.LATENCY

    def __init__(self, **params):
        self.PARAMS.apply(self, **params)
        self.is_signed = self.signed
        self.operand_shape = spec.operand_shape(self.params)
        self.result_shape = spec.result_shape(self.params)
        self.row_layout = spec.row_layout(self.params)
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_sum": Out(stream.Signature(self.result_shape)),
        })

    def elaborate(self, platform):
        m = Module()

        # Stage 1: one product per lane.
        product_shape = spec.product_shape(self.params)
        products = Signal(data.ArrayLayout(product_shape, self.lanes))
        products_valid = Signal()
        products_clear = Signal()
        products_read = Signal()

        # Stage 2: reduce and accumulate; a read row's result goes through the output stage to o_sum.
        m.submodules.output_stage = output_stage = StreamStage(self.result_shape)
        wiring.connect(m, output_stage.o_stream, wiring.flipped(self.o_sum))
        accumulator = Signal(self.result_shape)
        accumulate = Signal()
        advance = Signal()
        m.d.comb += [
            # The stage's ready is a register: nothing runs from o_sum.ready back to i_row.ready.
            accumulate.eq(products_valid & (~products_read | output_stage.i_stream.ready)),
            advance.eq(~products_valid | accumulate),
            self.i_row.ready.eq(advance),
        ]

        row_sum = adder_tree(products[lane] for lane in range(self.lanes))
        updated = Signal(self.result_shape)
        m.d.comb += [
            updated.eq(Mux(products_clear, 0, accumulator) + row_sum),
            output_stage.i_stream.payload.eq(updated),
            output_stage.i_stream.valid.eq(products_valid & products_read),
        ]
        with m.If(accumulate):
            m.d.sync += accumulator.eq(updated)

        with m.If(advance):
            m.d.sync += [
                products_valid.eq(self.i_row.valid),
                products_clear.eq(self.i_row.payload.clear),
                products_read.eq(self.i_row.payload.read),
            ]
            for lane in range(self.lanes):
                m.d.sync += products[lane].eq(self.i_row.payload.a[lane] * self.i_row.payload.b[lane])

        return m

