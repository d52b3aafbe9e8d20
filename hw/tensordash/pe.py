"""TensorDash processing element (paper, Section III-A, Fig. 4)."""
from amaranth import signed as signed_shape, unsigned
from amaranth.lib import data

from ...spec.params import Param, ParamSchema
from .core import SparseCore
from .mac import MAC_UNITS
from .params import DEPTH, LANES, PATTERN, check_pattern, pattern_of

__all__ = ["TDPE"]

WIDTH = Param("width", int, 8, "operand width in bits", minimum=2, maximum=32)
ACC_WIDTH = Param("acc_width", int, 32, "accumulator width in bits (wraps around)", minimum=2, maximum=64)
SIGNED = Param("signed", bool, True, "two's complement operands and accumulator")
MAC = Param("mac", str, "integer", "MAC unit behind the sparse interconnect", choices=tuple(MAC_UNITS))


class TDPE(SparseCore):
    """A dense PE (:class:`~trainforge.hw.dense_pe.DensePE`) extended with TensorDash.

    Staging buffers of ``depth`` rows for A and B (stored as one buffer of
    row pairs), per-value zero detectors, one sparse multiplexer per lane and
    operand driven by the same select ``MS_i``, the hierarchical scheduler,
    ``lanes`` multipliers and one accumulator (see
    :class:`~trainforge.hw.tensordash.core.SparseCore`). Results are those of
    the dense PE on the same rows; only the cycle count changes.

    Rows carry the dense PE's ``clear`` and ``read`` flags; they travel in
    groups of ``depth`` rows (pad the last group with zero rows without flags).

    Parameters
    ----------
    lanes : int
        Multiplier lanes L.
    depth : int
        Staging buffer depth D.
    pattern : str
        Connectivity pattern, ``"default"`` or ``"step:offset,..."``.
    mode : str
        ``"both"``: skip a pair when A or B is zero; ``"b_only"``: when B is zero.
    width, acc_width : int
        Operand and accumulator widths.
    signed : bool
        Two's complement arithmetic.
    mac : str
        MAC unit, a key of :data:`~trainforge.hw.tensordash.mac.MAC_UNITS`.

    Members
    -------
    i_group : In(stream.Signature(ArrayLayout(row_layout, depth)))
        ``depth`` rows per transfer, each ``a``, ``b`` (``lanes`` operands), ``clear``, ``read``.
    o_sum : Out(stream.Signature(result_shape))
        One accumulated dot product per ``read`` row.

    Attributes
    ----------
    row_layout : data.StructLayout
    group_layout : data.ArrayLayout
    result_shape : Shape
    levels : list of tuple of int
        Scheduler levels.
    """

    PARAMS = ParamSchema((
        LANES, DEPTH, PATTERN,
        Param("mode", str, "both", "which zero operands make a pair ineffectual", choices=("both", "b_only")),
        WIDTH, ACC_WIDTH, SIGNED, MAC,
    ), constraints=(check_pattern,))

    def __init__(self, *, lanes=4, depth=4, pattern="default", mode="both", width=8, acc_width=32,
                 signed=True, mac="integer"):
        self.params = self.PARAMS.resolve(lanes=lanes, depth=depth, pattern=pattern, mode=mode, width=width,
                                          acc_width=acc_width, signed=signed, mac=mac)
        operand = signed_shape(width) if signed else unsigned(width)
        self.result_shape = signed_shape(acc_width) if signed else unsigned(acc_width)
        self.row_layout = data.StructLayout({
            "a": data.ArrayLayout(operand, lanes),
            "b": data.ArrayLayout(operand, lanes),
            "clear": 1,
            "read": 1,
        })
        self.mode = mode
        self._setup(rows=1, cols=1, lanes=lanes, depth=depth, pattern=pattern_of(self.params),
                    both_sides=mode == "both", mac=mac, width=width, acc_width=acc_width, signed=signed)

    def operand_a(self, row_view, col):
        return row_view.a

    def operand_b(self, row_view, row):
        return row_view.b

    def result(self, payload, row, col):
        return payload
