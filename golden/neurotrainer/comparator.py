"""Golden model of :class:`trainforge.hw.neurotrainer.comparator.NTComparator`: vectorised numpy, bit-exact."""
import numpy as np

from ...spec.neurotrainer.comparator import PARAMS

__all__ = ["nt_comparator"]


_DEFAULTS = PARAMS.defaults


def nt_comparator(x, first, last, *, index_bits=_DEFAULTS["index_bits"], **_):
    """Window maxima and their argmax indices over a stream of rows.

    Parameters
    ----------
    x : array_like of int, shape (rows, lanes)
        Signed 16-bit elements.
    first, last : array_like of bool, shape (rows,)
        Window open and close flags. Rows before the first ``first`` row extend
        the reset window (maximum 0, index 0, position 0), as in the hardware.
    index_bits : int
        Index width; positions wrap modulo ``2**index_bits``.

    Returns
    -------
    values : numpy.ndarray of int64, shape (windows, lanes)
    indices : numpy.ndarray of int64, shape (windows, lanes)
    """
    x = np.asarray(x, dtype=np.int64)
    first = np.asarray(first, dtype=bool)
    last = np.asarray(last, dtype=bool)
    rows = x.shape[0]
    index = np.arange(rows)
    window_start = np.maximum.accumulate(np.where(first, index, -1))
    reset_window = window_start < 0
    # The hardware's position counter starts at 0 after reset, as it does after a 'first' row.
    position = np.where(reset_window, index, index - window_start) % (1 << index_bits)
    # Keys order by value, then by earliest row (tiebreak rows - row, row -1 being the reset element
    # of value 0); a segmented running maximum over windows (each later window offset above every
    # earlier one) gives each row's window maximum with the earliest index on ties.
    radix = rows + 2
    key = x * radix + (rows - index)[:, None]
    segment = np.where(reset_window, 0, window_start + 1)
    offset = segment[:, None] * (np.int64(1) << 42)
    running = np.maximum.accumulate(key + offset, axis=0) - offset
    reset_key = rows + 1
    running = np.where(reset_window[:, None], np.maximum(running, reset_key), running)
    values = running // radix
    best_row = rows - running % radix
    best_position = np.where(best_row < 0, 0, position[np.maximum(best_row, 0)])
    return values[last], best_position[last]
