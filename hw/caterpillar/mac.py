"""Arithmetic of the CATERPILLAR PE, swappable by name (the PE's ``mac`` parameter).

A MAC unit is a class built from ``(width, acc_width)`` whose methods
return Amaranth expressions: :meth:`~CPFixedPointMAC.multiply` (the PE's
multiplier, registered before and after by the PE),
:meth:`~CPFixedPointMAC.add` (the PE's accumulate stage and reduction adder)
and :meth:`~CPFixedPointMAC.multiply_accumulate` (both in one cycle, for the
reciprocal unit). It adds
no module of its own, so a core's PEs all elaborate into one flat Verilog
module. A half-precision floating-point unit drops in by adding a class with
the same methods to :data:`MAC_UNITS` and its name to
:data:`trainforge.spec.caterpillar.MAC_UNIT_NAMES` (the parameter schemas' choices).
"""

from ...spec.caterpillar import MAC_UNIT_NAMES

__all__ = ["CPFixedPointMAC", "MAC_UNITS"]


class CPFixedPointMAC:
    """Two's complement fixed point: products are exact, sums wrap modulo ``2 ** acc_width``.

    Parameters
    ----------
    width : int
        Width of the multiplier operands.
    acc_width : int
        Width of the accumulator, the addends and the results.
    """

    def __init__(self, width, acc_width):
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


#: MAC units by the name the PE's ``mac`` parameter takes.
MAC_UNITS = {"fixed": CPFixedPointMAC}
assert tuple(MAC_UNITS) == MAC_UNIT_NAMES, "the MAC unit names of the spec and of MAC_UNITS differ"
