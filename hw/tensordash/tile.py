"""TensorDash tile of R x C PEs (paper, Section III-A, "Composing TensorDash Cores", Fig. 7)."""
from ...spec import tensordash as spec
from .core import TDSparseCore

__all__ = ["TDTile"]


class TDTile(TDSparseCore):
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

    The schema, defaults included, is :data:`trainforge.spec.tensordash.TILE_PARAMS`.

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

    PARAMS = spec.TILE_PARAMS

    def __init__(self, **params):
        params = self.PARAMS.apply(self, **params)
        self.element_shape = spec.result_shape(params)
        self.result_shape = spec.tile_result_layout(params)
        self.row_layout = spec.tile_row_layout(params)
        self._setup(rows=params["rows"], cols=params["cols"], params=params, pattern=spec.pattern_of(params),
                    both_sides=False)

    def operand_a(self, row_view, col):
        return row_view.a[col]

    def operand_b(self, row_view, row):
        return row_view.b[row]

    def result(self, payload, row, col):
        return payload[row][col]
