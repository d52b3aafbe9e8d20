"""TensorDash tile of R x C PEs (paper, Section III-A, "Composing TensorDash Cores", Fig. 7)."""
from amaranth import signed as signed_shape, unsigned
from amaranth.lib import data

from ...spec.params import Param, ParamSchema
from .core import SparseCore
from .params import DEPTH, LANES, PATTERN, check_pattern, pattern_of
from .pe import ACC_WIDTH, MAC, SIGNED, WIDTH

__all__ = ["TDTile"]


class TDTile(SparseCore):
    """``rows`` x ``cols`` TensorDash PEs that skip zeros of the B operand only.

    PE ``(r, c)`` accumulates the dot product of B stream ``r`` with A stream
    ``c``. Each PE row shares one B-side staging buffer, one scheduler and one
    B-side mux block; each column has one A-side staging buffer, and every PE
    has its own A-side mux block driven by its row's ``MS``. The schedulers see
    only the B-side zero vectors.

    Row synchronization (the rule implemented, exactly): every cycle all
    staging buffers advance by ``min_r AS_r``, so all rows move in tandem to
    the next A values; a row that drained more waits, keeping what it already
    multiplied ahead marked as done (see :mod:`trainforge.golden.tensordash.core`).

    Parameters
    ----------
    rows, cols : int
        PE rows R and columns C.
    lanes, depth : int
    pattern : str
    width, acc_width : int
    signed : bool
    mac : str

    Members
    -------
    i_group : In(stream.Signature(ArrayLayout(row_layout, depth)))
        ``depth`` rows per transfer; a row holds ``a[c][lane]``, ``b[r][lane]``, ``clear``, ``read``.
    o_sum : Out(stream.Signature(ArrayLayout(ArrayLayout(result, cols), rows)))
        All R x C dot products, once per ``read`` row.

    Attributes
    ----------
    row_layout : data.StructLayout
    group_layout : data.ArrayLayout
    result_shape : data.ArrayLayout
    levels : list of tuple of int
    """

    PARAMS = ParamSchema((
        Param("rows", int, 4, "PE rows R (one B stream and scheduler each)", minimum=1, maximum=16),
        Param("cols", int, 4, "PE columns C (one A stream each)", minimum=1, maximum=8),
        LANES, DEPTH, PATTERN, WIDTH, ACC_WIDTH, SIGNED, MAC,
    ), constraints=(check_pattern,))

    def __init__(self, *, rows=4, cols=4, lanes=4, depth=4, pattern="default", width=8, acc_width=32,
                 signed=True, mac="integer"):
        self.params = self.PARAMS.resolve(rows=rows, cols=cols, lanes=lanes, depth=depth, pattern=pattern,
                                          width=width, acc_width=acc_width, signed=signed, mac=mac)
        operand = signed_shape(width) if signed else unsigned(width)
        self.element_shape = signed_shape(acc_width) if signed else unsigned(acc_width)
        self.result_shape = data.ArrayLayout(data.ArrayLayout(self.element_shape, cols), rows)
        self.row_layout = data.StructLayout({
            "a": data.ArrayLayout(data.ArrayLayout(operand, lanes), cols),
            "b": data.ArrayLayout(data.ArrayLayout(operand, lanes), rows),
            "clear": 1,
            "read": 1,
        })
        self._setup(rows=rows, cols=cols, lanes=lanes, depth=depth, pattern=pattern_of(self.params),
                    both_sides=False, mac=mac, width=width, acc_width=acc_width, signed=signed)

    def operand_a(self, row_view, col):
        return row_view.a[col]

    def operand_b(self, row_view, row):
        return row_view.b[row]

    def result(self, payload, row, col):
        return payload[row][col]
