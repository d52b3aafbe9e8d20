"""TensorDash processing element (paper, Section III-A, Fig. 4)."""
from ...spec import tensordash as spec
from .core import TDSparseCore

__all__ = ["TDPE"]


class TDPE(TDSparseCore):
    """A dense PE (:class:`~trainforge.hw.dense_pe.DensePE`) extended with TensorDash.

    Staging buffers of ``depth`` rows for A and B (stored as one buffer of
    row pairs), per-value zero detectors, one sparse multiplexer per lane and
    operand driven by the same select ``MS_i``, the hierarchical scheduler,
    ``lanes`` multipliers and one accumulator (see
    :class:`~trainforge.hw.tensordash.core.TDSparseCore`). Results are those of
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
        MAC unit, a key of :data:`~trainforge.hw.mac.MAC_UNITS`.

    The schema, defaults included, is :data:`trainforge.spec.tensordash.PE_PARAMS`.

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

    PARAMS = spec.PE_PARAMS

    def __init__(self, **params):
        params = self.PARAMS.apply(self, **params)
        self.result_shape = spec.result_shape(params)
        self.row_layout = spec.pe_row_layout(params)
        self._setup(rows=1, cols=1, params=params, pattern=spec.pattern_of(params),
                    both_sides=params["mode"] == "both")

    def operand_a(self, row_view, col):
        return row_view.a

    def operand_b(self, row_view, row):
        return row_view.b

    def result(self, payload, row, col):
        return payload
