"""The MAC units behind the dense PE and the TensorDash PE and tile (:mod:`trainforge.spec.mac`).

A MAC unit is an object with the members a PE uses, and nothing else:

``operand_shape``, ``product_shape``, ``result_shape``
    Amaranth shapes (:func:`trainforge.spec.mac.operand_shape` and friends).
``multiply_stages``, ``tree_stages``
    Register stages of the multiplier and of the lane reduction.
``is_zero(operand)``
    The zero detector of one operand (a 1-bit value).
``multiply(m, a, b, active, enable, name)``
    Adds one lane's multiplier to module ``m`` and returns its product after
    ``multiply_stages`` registers (clock enable ``enable``); an idle lane
    (``active`` low) gives the idle product. ``a`` and ``b`` come from
    registers.
``reduce(m, products, enable, name)``
    Adds the lane reduction and returns the lanes' sum after ``tree_stages``
    registers (clock enable ``enable``).
``accumulate(accumulator, row_sum, clear)``
    The new accumulator (combinational): ``row_sum`` added to the accumulator,
    or to zero when ``clear``. The PE registers it.

:data:`MAC_UNITS` maps the ``mac`` parameter to the class; each class takes
the resolved parameter dict of its PE.
"""
from amaranth import Mux, Signal

from ..spec import mac as spec
from .adder_tree import adder_tree

__all__ = ["IntegerMAC", "MAC_UNITS"]


class IntegerMAC:
    """Integer multiply, exact adder tree, wrap-around accumulator.

    Parameters
    ----------
    params : dict
        Resolved parameters with ``lanes``, ``width``, ``acc_width``, ``signed`` and ``mac``.
    """

    def __init__(self, params):
        self.operand_shape = spec.operand_shape(params)
        self.product_shape = spec.product_shape(params)
        self.result_shape = spec.result_shape(params)
        self.multiply_stages = spec.multiply_stages(params)
        self.tree_stages = spec.tree_stages(params)
        self.sum_shape = adder_tree([Signal(self.product_shape)] * params["lanes"]).shape()

    def is_zero(self, operand):
        return operand == 0

    def multiply(self, m, a, b, active, enable, name):
        product = Signal(self.product_shape, name=f"{name}_product")
        with m.If(enable):
            m.d.sync += product.eq(Mux(active, a * b, 0))
        return product

    def reduce(self, m, products, enable, name):
        row_sum = Signal(self.sum_shape, name=f"{name}_sum")
        with m.If(enable):
            m.d.sync += row_sum.eq(adder_tree(products))
        return row_sum

    def accumulate(self, accumulator, row_sum, clear, m=None):
        return Mux(clear, 0, accumulator) + row_sum


#: MAC unit classes by the value of a PE's ``mac`` parameter (:data:`trainforge.spec.mac.MAC_NAMES`).
MAC_UNITS = {"integer": IntegerMAC}
