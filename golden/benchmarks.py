"""Benchmarks of the golden models on full-size workloads (see ``trainforge bench``)."""
import functools

import numpy as np

from trainforge.golden.dense_pe import dense_pe

_ROWS, _LANES, _DOT_LENGTH = 1_000_000, 16, 256


@functools.cache
def _dense_pe_inputs():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (_ROWS, _LANES))
    b = rng.integers(-128, 128, (_ROWS, _LANES))
    clear = np.zeros(_ROWS, dtype=bool)
    clear[::_DOT_LENGTH] = True
    return a, b, clear, np.roll(clear, -1)


def _dense_pe_stream():
    dense_pe(*_dense_pe_inputs(), acc_width=32, signed=True)


BENCHMARKS = {
    "golden_dense_pe_1M_rows": (_dense_pe_stream, {
        "rows": _ROWS, "lanes": _LANES, "width": 8, "acc_width": 32, "dot_product_length": _DOT_LENGTH}),
}
