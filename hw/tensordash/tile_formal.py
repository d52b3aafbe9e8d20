"""Formal wrapper of the TensorDash tile: every effectual pair multiplied once, in its own dot product, per PE row."""
from ...errors import ParameterError
from .pe_formal import PEDotProductProperties
from .tile import TDTile

__all__ = ["PROPERTIES", "TileDotProductProperties"]

#: The groups of properties of the tile, as those of :data:`trainforge.hw.tensordash.pe_formal.PROPERTIES`:
#: ``counts`` and ``order`` per PE row, ``sums`` per PE (the A operand of its column with the B operand of its row:
#: what shows a column's A operands broadcast wrongly), ``lemmas`` (of ``counts`` and ``order`` only).
PROPERTIES = ("counts", "sums", "order", "lemmas")


class TileDotProductProperties(PEDotProductProperties):
    """A ``td_tile`` between a free producer and a free consumer, with ghost counters per dot product and PE row.

    The PE's wrapper (:class:`~trainforge.hw.tensordash.pe_formal.PEDotProductProperties`), per PE row: a free
    constant ``tag`` picks one dot product (the rows after one ``read`` row up to the next; the ``read`` flags
    are shared by the tile's PEs, so the dot products are numbered alike in every PE). Ghost state from the
    stream counts, for each PE row ``r``, the tagged dot product's effectual pairs as they enter (``b[r][lane]``
    non-zero: the tile skips zeros of B only, so the pairs of PE ``(r, c)`` are those of its row whatever the
    column), and at the multipliers the lanes row ``r``'s scheduler selected for it (the last operand stage's
    ``active`` bits, which every PE of the row multiplies with its column's A operand).

    Asserted (``counts``): when the tagged ``read`` row reaches the multipliers, in every PE row the products
    counted equal the effectual pairs that entered, all of which have entered. Asserted (``order``): no result
    leaves before its ``read`` row entered and its products were multiplied. Asserted (``sums``, bounded only):
    the tagged result of each PE ``(r, c)`` is the dense accumulation of ``a[c] * b[r]`` over its rows, from free
    operand values (a column's A operands sent to the wrong PEs, or met with the wrong B lanes, show there; the
    counts do not look at A). Asserted (``lemmas``): the PE's
    lemmas, per PE row, through both operand stages (the tile rotates each stream's window into stream order in
    a registered stage before the sparse muxes), and that each row's copy of the visible rows equals the shared
    one. Together with the row schedulers' logic, they make the shared advance (the AND of the rows' drained
    codes: a window row leaves only when every PE row has scheduled all its pairs) part of the induction step.

    Assumed: no reset after the start; ``i_group`` keeps the stream rules; ``o_sum.ready`` is free.

    Parameters
    ----------
    tile : TDTile, optional
        The tile under proof (a deliberately broken one shows that the proof can fail); by default
        ``TDTile(**params)``.
    properties : sequence of str
        The groups of :data:`PROPERTIES` to assert (all by default).
    count_bits : int
        Width of the ghost dot-product counters and of ``tag``; with ``lemmas``, wide enough to number the
        read rows in flight and one more (5 bits at 2 rows deep: 16 read rows).
    pair_bits : int, optional
        Width of the ghost pair counters (``count_bits`` by default).
    sum_pes : sequence of (int, int), optional
        The PEs (row, column) whose sums ``sums`` asserts (all by default; fewer keep a bounded proof small).
    **params
        ``td_tile`` parameters (integer MAC).

    Attributes
    ----------
    ports : list of Value
        The free inputs of the wrapper.
    """

    known_properties = PROPERTIES

    def __init__(self, tile=None, properties=PROPERTIES, count_bits=6, pair_bits=None, sum_pes=None, **params):
        self.tile = TDTile(**params) if tile is None else tile
        if self.tile.params["mac"] != "integer":
            raise ParameterError(f"the tile proof takes mac='integer', not mac={self.tile.params['mac']!r}")
        self._setup(self.tile, properties, count_bits, pair_bits, sum_pes)

    def operands(self, view, row, col):
        """PE ``(row, col)`` multiplies column ``col``'s A lanes with row ``row``'s B lanes."""
        return view.a[col], view.b[row]

    def effectual(self, view, row, lane):
        """The pair of ``lane`` of PE row ``row`` is effectual when its B operand is non-zero (from the stream)."""
        return view.b[row][lane] != 0
