"""Swappable MAC units of the TensorDash PE: the arithmetic behind the sparse interconnect.

A MAC unit is a class with the members the PE uses, and nothing else:

- ``operand_shape``, ``product_shape``, ``result_shape``: Amaranth shapes;
- ``multiply(a, b)``: the product of one lane, an Amaranth value;
- ``accumulate(accumulator, products, clear)``: the new accumulator from the
  old one (or zero when ``clear``) and one cycle's lane products.

:data:`MAC_UNITS` maps the PE's ``mac`` parameter to the class; a floating-point
unit plugs in as one more entry (and one more golden model in
:data:`trainforge.golden.tensordash.pe.GOLDEN_MACS`).
"""
from amaranth import Mux, signed, unsigned

from ..adder_tree import adder_tree

__all__ = ["TDIntegerMAC", "MAC_UNITS"]


class TDIntegerMAC:
    """Integer multiply and wrap-around accumulate, bit-exact with :class:`~trainforge.hw.dense_pe.DensePE`.

    Parameters
    ----------
    width : int
        Operand width.
    acc_width : int
        Accumulator width; sums wrap modulo ``2 ** acc_width``.
    signed : bool
        Two's complement operands and accumulator.
    """

    def __init__(self, *, width, acc_width, signed):
        shape = _signed if signed else unsigned
        self.operand_shape = shape(width)
        self.product_shape = shape(2 * width)
        self.result_shape = shape(acc_width)

    def multiply(self, a, b):
        return a * b

    def accumulate(self, accumulator, products, clear):
        return Mux(clear, 0, accumulator) + adder_tree(products)


_signed = signed

#: MAC unit classes by the value of the PE's ``mac`` parameter (:data:`trainforge.spec.tensordash.MAC_NAMES`).
MAC_UNITS = {"integer": TDIntegerMAC}
