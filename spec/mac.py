"""The MAC units behind the dense PE and the TensorDash PE and tile: names, shapes, pipeline stages.

A MAC unit multiplies one operand pair per lane, reduces the lanes' products
to one sum per cycle and adds that sum to an accumulator. The PE around it
is the same for every unit; the unit fixes the arithmetic and how many
register stages its multiplier and its lane reduction take.

``integer``
    Operands of ``width`` bits (two's complement when ``signed``), exact
    products, an exact adder tree, an accumulator of ``acc_width`` bits that
    wraps around.
``fp16``, ``bf16``
    IEEE half (or bfloat16) operands; each product is exact in FP32; the
    lanes' products are summed by a pairwise FP32 adder tree and the sum is
    added to an FP32 accumulator (the order and the rounding are those of
    :mod:`trainforge.golden.fp`; the policy is :mod:`trainforge.spec.fp`).
    ``width``, ``acc_width`` and ``signed`` do not apply.

The pipeline of a unit, from registered operands to the result:
:func:`multiply_stages` registers in the multiplier (the last one holds the
product), :func:`tree_stages` registers in the lane reduction (the last one
holds the sum), then :func:`accumulate_stages` registers in the accumulator.

The integer accumulator is one register: the result of a row is its new
value, in the row's own cycle (0 stages). The FP32 accumulator is the
*interleaved* one: ``P = partial_sums`` partial sums (:data:`PARTIAL_SUMS`)
around one FP32 adder of ``P`` register stages whose sum goes back to its
input, so that the loop is as long as one stage of that adder: the rows
since the last ``clear`` (that row included) are counted from 0, and row
``j`` is added to partial ``j mod P``, which starts from ``+0`` at its first
row after the clear. A row's result is the sum of the partials after
it, by the pairwise adder tree (``(p0 + p1) + (p2 + p3)``; a partial not yet
written since the clear counts as ``+0``): :func:`accumulate_stages` is the
adder's stages (the row's partial), a register of the partials, and the
tree's. Reset acts as a clear.
The order of the additions, and so the rounding, is the golden model's
:func:`trainforge.golden.fp.fp32_accumulate`.

Zero detection (the TensorDash zero detectors): an integer operand is zero
when all its bits are; a floating-point operand is zero when its exponent
field is 0 (``+0``, ``-0`` and the subnormals, which the datapath flushes to
zero). An idle lane contributes the *idle product*: integer 0, FP32 ``+0``.
"""
import numpy as np
from amaranth import signed as signed_shape, unsigned

from .fp import BF16, FP16, FP32
from .params import Param

__all__ = ["MAC_NAMES", "MAC", "FLOAT_FORMATS", "is_float", "multiply_stages", "tree_stages",
           "PARTIAL_SUMS", "accumulate_stages", "reduce_partials_stages", "registers_addend",
           "operand_shape", "product_shape", "result_shape", "IDLE_PRODUCT", "zero_operands"]

#: The MAC units, by the value of a PE's ``mac`` parameter.
MAC_NAMES = ("integer", "fp16", "bf16")

#: The ``mac`` parameter of the PEs that take a MAC unit.
MAC = Param("mac", str, "integer", "MAC unit: 'integer', or FP16 / bfloat16 multiply with FP32 accumulation",
            choices=MAC_NAMES)

#: Operand format of each floating-point unit.
FLOAT_FORMATS = {"fp16": FP16, "bf16": BF16}

#: Register stages of the multiplier, from the operand registers to the product register included. The
#: integer multiplier registers its operands once more beside the MULT18 block: in the 4x4 tile the path
#: from the operand registers through the 64 spread-out MULT18s was the critical one (13.5 ns, 9 ns routing).
MULTIPLY_STAGES = {"integer": 2, "fp16": 2, "bf16": 2}

#: Register stages of the ``fp32_add`` block's FP32 adder (swap | align, add | count, normalise | round, pack).
FP32_ADD_STAGES = 4

#: Register stages of each FP32 adder of the feed-forward adder trees (the lane reduction and the sum of the
#: accumulator's partials): every step of the adder alone (``fp32_add`` with 7 stages alone: 118 MHz on the
#: ECP5). They hold no loop, so they cost latency and flip-flops, never a partial sum.
FP32_TREE_ADD_STAGES = 7

#: The ``partial_sums`` parameter of the PEs that take a MAC unit: partial sums of the interleaved FP32
#: accumulator, one per register stage of its adder, so that a row's partial was last written by the row
#: ``partial_sums`` before it, whose sum has just left the adder. 4 (the default) makes every loop of the PE
#: one stage of the 4-stage adder; 8 registers the chosen partial and the row's sum, then puts every step
#: of the adder in a stage of its own (the fastest, with 7 adders to sum the partials); 1 is a one-cycle
#: accumulation loop (the whole adder), the smallest.
PARTIAL_SUMS = Param("partial_sums", int, 4,
                     "FP MACs: partial sums of the interleaved FP32 accumulator (= its adder's stages; "
                     "1: a one-cycle loop, smallest; 4: no loop longer than one adder stage; 8: one adder step "
                     "per stage, fastest)", choices=(1, 2, 4, 8))

#: The product of an idle lane, as the bits of the unit's product (integer 0, FP32 +0).
IDLE_PRODUCT = 0


def is_float(params):
    """Whether the resolved parameters select a floating-point unit."""
    return params["mac"] in FLOAT_FORMATS


def multiply_stages(params):
    """Register stages of the multiplier of ``params["mac"]``."""
    return MULTIPLY_STAGES[params["mac"]]


def tree_stages(params):
    """Register stages of the lane reduction: one for the integer tree, one adder's per FP tree level."""
    if not is_float(params):
        return 1
    levels = max(1, (params["lanes"] - 1).bit_length())
    return levels * FP32_TREE_ADD_STAGES


def reduce_partials_stages(partials):
    """Register stages of the adder tree that sums ``partials`` partial sums (0 for one)."""
    return (partials - 1).bit_length() * FP32_TREE_ADD_STAGES


def registers_addend(partials):
    """Whether the interleaved accumulator of ``partials`` partial sums registers its operands (the chosen
    partial and the row's sum) in a stage of their own before an adder of ``partials - 1`` stages: with 8,
    so that the choice among the partials does not sit in front of the adder's first step. The loop stays
    ``partials`` stages long either way."""
    return partials > 4


def accumulate_stages(params):
    """Register stages from the lane sum to the result: 0 for the integer accumulator (its new value is the
    result); for FP32, the interleaved accumulator's adder (``partial_sums`` stages), a register of the
    partials, then the adder tree over them (4 + 1 + 14 = 19 by default, 1 + 1 + 0 = 2 for one partial)."""
    if not is_float(params):
        return 0
    partials = params["partial_sums"]
    return partials + 1 + reduce_partials_stages(partials)


def _shape(width, is_signed):
    return signed_shape(width) if is_signed else unsigned(width)


def operand_shape(params):
    """Shape of one operand: ``width`` bits for ``integer``, the format's 16 bits otherwise."""
    if is_float(params):
        return unsigned(FLOAT_FORMATS[params["mac"]].width)
    return _shape(params["width"], params["signed"])


def product_shape(params):
    """Shape of one lane's product: exact integer, or FP32 bits."""
    if is_float(params):
        return unsigned(FP32.width)
    return _shape(2 * params["width"], params["signed"])


def result_shape(params):
    """Shape of the accumulator and of a result: ``acc_width`` bits, or FP32 bits."""
    if is_float(params):
        return unsigned(FP32.width)
    return _shape(params["acc_width"], params["signed"])


def zero_operands(values, params):
    """What the zero detectors say of ``values`` (operands, or their bit patterns for an FP unit): a bool array.

    Integer: the value is 0. Floating point: the exponent field is 0 (``+0``, ``-0``, subnormals).
    """
    values = np.asarray(values)
    if not is_float(params):
        return values == 0
    fmt = FLOAT_FORMATS[params["mac"]]
    return (values.astype(np.int64) >> fmt.fraction_bits) & fmt.exponent_max_field == 0
