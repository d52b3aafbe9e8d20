"""Dense baseline processing element (TensorDash, Fig. 2)."""
from amaranth import Module, Signal, Mux, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .adder_tree import adder_tree
from .params import Param, ParamSchema

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
    the row was accepted. ``o_sum`` is a one-entry output register; the PE
    stalls its input only when a ``read`` row would overwrite a result that
    has not been taken yet.

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

    PARAMS = ParamSchema((
        Param("lanes", int, 4, "multiplier lanes L", minimum=1, maximum=64),
        Param("width", int, 8, "operand width in bits", minimum=2, maximum=32),
        Param("acc_width", int, 32, "accumulator width in bits (wraps around)", minimum=2, maximum=64),
        Param("signed", bool, True, "two's complement operands and accumulator"),
    ))

    #: Cycles from the acceptance of a ``read`` row to its result on ``o_sum``, without stalls.
    LATENCY = 2

    def __init__(self, *, lanes=4, width=8, acc_width=32, signed=True):
        self.params = self.PARAMS.resolve(lanes=lanes, width=width, acc_width=acc_width, signed=signed)
        self.lanes = lanes
        self.width = width
        self.acc_width = acc_width
        self.is_signed = signed
        self.operand_shape = _shape(width, signed)
        self.result_shape = _shape(acc_width, signed)
        self.row_layout = data.StructLayout({
            "a": data.ArrayLayout(self.operand_shape, lanes),
            "b": data.ArrayLayout(self.operand_shape, lanes),
            "clear": 1,
            "read": 1,
        })
        super().__init__({
            "i_row": In(stream.Signature(self.row_layout)),
            "o_sum": Out(stream.Signature(self.result_shape)),
        })

    def elaborate(self, platform):
        m = Module()

        # Stage 1: one product per lane.
        product_shape = _shape(2 * self.width, self.is_signed)
        products = Signal(data.ArrayLayout(product_shape, self.lanes))
        products_valid = Signal()
        products_clear = Signal()
        products_read = Signal()

        # Stage 2: reduce and accumulate; results go to the o_sum register.
        accumulator = Signal(self.result_shape)
        result_slot_free = ~self.o_sum.valid | self.o_sum.ready
        accumulate = Signal()
        advance = Signal()
        m.d.comb += [
            accumulate.eq(products_valid & (~products_read | result_slot_free)),
            advance.eq(~products_valid | accumulate),
            self.i_row.ready.eq(advance),
        ]

        with m.If(self.o_sum.ready):
            m.d.sync += self.o_sum.valid.eq(0)

        row_sum = adder_tree(products[lane] for lane in range(self.lanes))
        updated = Signal(self.result_shape)
        m.d.comb += updated.eq(Mux(products_clear, 0, accumulator) + row_sum)
        with m.If(accumulate):
            m.d.sync += accumulator.eq(updated)
            with m.If(products_read):
                m.d.sync += [
                    self.o_sum.payload.eq(updated),
                    self.o_sum.valid.eq(1),
                ]

        with m.If(advance):
            m.d.sync += [
                products_valid.eq(self.i_row.valid),
                products_clear.eq(self.i_row.payload.clear),
                products_read.eq(self.i_row.payload.read),
            ]
            for lane in range(self.lanes):
                m.d.sync += products[lane].eq(self.i_row.payload.a[lane] * self.i_row.payload.b[lane])

        return m


def _shape(width, is_signed):
    return signed(width) if is_signed else unsigned(width)
