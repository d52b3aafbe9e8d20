"""Arithmetic of the CATERPILLAR PE, swappable by name (the PE's ``mac`` parameter).

A MAC unit is a class built from ``(width, acc_width, m, name)`` (``m`` the
module the unit's named nets go into, ``name`` their prefix) whose methods
return Amaranth expressions: :meth:`~CPFixedPointMAC.multiply` (the PE's
multiplier, registered before and after by the PE),
:meth:`~CPFixedPointMAC.add` (the PE's accumulate stage and reduction adder)
and :meth:`~CPFixedPointMAC.multiply_accumulate` (both in one cycle, for the
reciprocal unit). It adds
no module of its own, so a core's PEs all elaborate into one flat Verilog
module. The units are :class:`CPFixedPointMAC` (``fixed``) and
:class:`CPHalfPrecisionMAC` (``fp16``, the paper's half-precision FPU).
"""

from ...spec.caterpillar import FP16_MAC, MAC_UNIT_NAMES
from ..fp.add import fp32_add
from ..fp.multiply import fp_multiply

__all__ = ["CPFixedPointMAC", "CPHalfPrecisionMAC", "MAC_UNITS"]


class CPFixedPointMAC:
    """Two's complement fixed point: products are exact, sums wrap modulo ``2 ** acc_width``.

    Parameters
    ----------
    width : int
        Width of the multiplier operands.
    acc_width : int
        Width of the accumulator, the addends and the results.
    m : Module, optional
        Unused (the fixed-point unit is plain expressions).
    name : str, optional
        Unused.
    """

    def __init__(self, width, acc_width, m=None, name="mac"):
        self.width = width
        self.acc_width = acc_width

    def multiply(self, a, b):
        """``a * b``, exact (``2 * width`` bits)."""
        return a * b

    def multiply_accumulate(self, a, b, addend):
        """``addend + a * b``, wrapped to a signed ``acc_width`` value."""
        return (addend + a * b)[:self.acc_width].as_signed()

    def add(self, x, y):
        """``x + y``, wrapped to a signed ``acc_width`` value."""
        return (x + y)[:self.acc_width].as_signed()


class CPHalfPrecisionMAC:
    """The half-precision FPU: FP16 operands, exact FP32 products, FP32 sums rounded to nearest even.

    Built from the shared FP blocks (:mod:`trainforge.hw.fp`; policy
    :mod:`trainforge.spec.fp`: subnormals flushed on input and output,
    canonical quiet NaN): :meth:`multiply` is the FP16 x FP16 -> FP32
    multiplier (exact, no rounding), :meth:`add` one FP32 adder
    (one rounding). Both are combinational here: the PE registers the
    operands before the multiplier, the product after it, and the sum in the
    accumulator. The golden model is
    :func:`trainforge.golden.caterpillar.pe.fp16_multiply_accumulate`.

    Parameters
    ----------
    width : int
        16 (the schema's constraint): the FP16 operand.
    acc_width : int
        32: the FP32 accumulator, addends and results.
    m : Module
        The PE's module: each step of the FP datapaths is a named net there.
    name : str
        Prefix of those nets (each call adds a numbered datapath).
    """

    def __init__(self, width, acc_width, m, name="mac"):
        assert (width, acc_width) == (FP16_MAC["operand"].width, FP16_MAC["accumulator"].width)
        self.width, self.acc_width = width, acc_width
        self.m, self.name = m, name
        self._datapaths = 0

    def _next_name(self, kind):
        self._datapaths += 1
        return f"{self.name}_{kind}{self._datapaths}"

    def multiply(self, a, b):
        """``a * b``: the exact FP32 product of two FP16 bit patterns."""
        return fp_multiply(self.m, a, b, FP16_MAC["operand"], stages=0, name=self._next_name("mul"))

    def add(self, x, y):
        """``x + y`` in FP32, rounded to nearest even."""
        return fp32_add(self.m, x, y, stages=0, name=self._next_name("add"))

    def multiply_accumulate(self, a, b, addend):
        """``addend + a * b``: the exact product, then one FP32 rounding (a fused multiply-add)."""
        return self.add(addend, self.multiply(a, b))


#: MAC units by the name the PE's ``mac`` parameter takes.
MAC_UNITS = {"fixed": CPFixedPointMAC, "fp16": CPHalfPrecisionMAC}
assert tuple(MAC_UNITS) == MAC_UNIT_NAMES, "the MAC unit names of the spec and of MAC_UNITS differ"
