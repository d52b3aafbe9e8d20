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
    (``active`` low) gives the idle product. ``a``, ``b`` and ``active``
    come from registers (the FP units carry ``active`` down their pipeline
    beside the operands).
``reduce(m, products, enable, name)``
    Adds the lane reduction and returns the lanes' sum after ``tree_stages``
    registers (clock enable ``enable``).
``accumulator(m, valid, clear, read, enable, name)``
    The control of the accumulators of a PE (or of a tile's PEs, which share
    their rows' flags), given the flags of the row whose sum reaches the
    accumulator *next* cycle (registers of the lane reduction's last stage
    but one: the unit registers them, and the FP unit chooses a row's
    partial sum from them a cycle ahead). It has ``result_valid`` (made of registers: a ``read`` row's
    result is out this cycle, :func:`trainforge.spec.mac.accumulate_stages`
    cycles after the row came in) and ``add(row_sum, name)``, which adds one
    PE's accumulator and returns its result. The integer accumulator is one
    register, ``(clear ? 0 : acc) + row_sum``, the new value being the result
    in the row's own cycle. The FP units' is the interleaved accumulator of
    :mod:`trainforge.hw.fp.accumulate`, whose loops are no longer than one
    stage of the pipelined FP32 adder.

The floating-point units also have ``fmt`` (the operand
:class:`~trainforge.spec.fp.FloatFormat`); both kinds have ``sum_shape``
(the shape of ``reduce``'s result).

:data:`MAC_UNITS` maps the ``mac`` parameter to the class; each class takes
the resolved parameter dict of its PE.
"""
from amaranth import Mux, Signal

from ..spec import mac as spec
from .adder_tree import adder_tree
from .fp.accumulate import InterleavedAccumulator
from .fp.add import fp32_add
from .fp.multiply import fp_multiply
from .fp.stages import register_values
from .registered_multiplier import RegisteredMultiplier

__all__ = ["IntegerAccumulator", "IntegerMAC", "FloatMAC", "MAC_UNITS"]


class IntegerAccumulator:
    """The wrap-around accumulators of a PE's integer MAC units: one register each, no added stage.

    Parameters
    ----------
    m : Module
        The PE's module.
    valid, clear, read : Value
        The flags of the row whose sum reaches the accumulator next cycle (registered here).
    enable : Value
        The PE's clock enable.
    result_shape : Shape
        Shape of an accumulator.

    Members
    -------
    result_valid : Value
        A valid ``read`` row is at the accumulator: its result is the accumulator's new value, this cycle.
    """

    def __init__(self, m, valid, clear, read, enable, result_shape):
        flags = register_values(m, {"valid": valid, "clear": clear, "read": read}, enable, "accumulate_row")
        self.m, self.valid, self.clear, self.enable = m, flags["valid"], flags["clear"], enable
        self.result_shape = result_shape
        self.result_valid = flags["valid"] & flags["read"]

    def add(self, row_sum, name):
        """One accumulator; returns its new value (combinational), which it loads on a valid row."""
        accumulator = Signal(self.result_shape, name=f"{name}_accumulator")
        updated = Signal(self.result_shape, name=f"{name}_updated")
        self.m.d.comb += updated.eq(Mux(self.clear, 0, accumulator) + row_sum)
        with self.m.If(self.enable & self.valid):
            self.m.d.sync += accumulator.eq(updated)
        return updated


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
        # The operands registered again beside the multiplier, then the product: a RegisteredMultiplier
        # (on the ECP5, the MULT18X18D's own registers). An idle lane multiplies a zero operand.
        assert self.multiply_stages == 2, "the registered multiplier has two stages"
        m.submodules[name] = multiplier = RegisteredMultiplier(self.operand_shape, self.operand_shape)
        m.d.comb += [
            multiplier.a.eq(Mux(active, a, 0)),
            multiplier.b.eq(b),
            multiplier.enable.eq(enable),
        ]
        product = Signal(self.product_shape, name=f"{name}_product")
        m.d.comb += product.eq(multiplier.product)
        return product

    def reduce(self, m, products, enable, name):
        row_sum = Signal(self.sum_shape, name=f"{name}_sum")
        with m.If(enable):
            m.d.sync += row_sum.eq(adder_tree(products))
        return row_sum

    def accumulator(self, m, valid, clear, read, enable, name):
        return IntegerAccumulator(m, valid, clear, read, enable, self.result_shape)


class FloatMAC:
    """FP16 (or BF16) multiply, exact in FP32; pairwise FP32 adder tree; interleaved FP32 accumulator.

    The arithmetic is bit for bit :func:`trainforge.golden.fp.fp_mul_exact`,
    :func:`~trainforge.golden.fp.fp32_sum_tree` (lanes ``0+1, 2+3, ...`` level by
    level, an odd last lane delayed to the next level) and
    :func:`~trainforge.golden.fp.fp32_accumulate` (:mod:`trainforge.hw.fp.accumulate`).

    Parameters
    ----------
    params : dict
        Resolved parameters with ``lanes``, ``mac`` (``"fp16"`` or ``"bf16"``) and ``partial_sums``;
        ``width``, ``acc_width`` and ``signed`` are not read.
    """

    def __init__(self, params):
        self.fmt = spec.FLOAT_FORMATS[params["mac"]]
        self.lanes = params["lanes"]
        self.partial_sums = params["partial_sums"]
        self.operand_shape = spec.operand_shape(params)
        self.product_shape = spec.product_shape(params)
        self.result_shape = spec.result_shape(params)
        self.sum_shape = spec.result_shape(params)
        self.multiply_stages = spec.multiply_stages(params)
        self.tree_stages = spec.tree_stages(params)

    def is_zero(self, operand):
        return operand[self.fmt.fraction_bits:self.fmt.fraction_bits + self.fmt.exponent_bits] == 0

    def multiply(self, m, a, b, active, enable, name):
        return fp_multiply(m, a, b, self.fmt, self.multiply_stages, enable, active, name=f"{name}_mul")

    def reduce(self, m, products, enable, name):
        level = list(products)
        depth = 0
        while len(level) > 1 or depth == 0:
            sums = [fp32_add(m, level[k], level[k + 1], spec.FP32_TREE_ADD_STAGES, enable,
                             name=f"{name}_add{depth}_{k // 2}")
                    for k in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                odd = level[-1]
                for stage in range(spec.FP32_TREE_ADD_STAGES):
                    odd = register_values(m, {"lane": odd}, enable, f"{name}_pass{depth}_{stage}")["lane"]
                sums.append(odd)
            level = sums
            depth += 1
        return level[0]

    def accumulator(self, m, valid, clear, read, enable, name):
        return InterleavedAccumulator(m, valid, clear, read, enable, self.reduce, self.partial_sums, name)


#: MAC unit classes by the value of a PE's ``mac`` parameter (:data:`trainforge.spec.mac.MAC_NAMES`).
MAC_UNITS = {"integer": IntegerMAC, "fp16": FloatMAC, "bf16": FloatMAC}
