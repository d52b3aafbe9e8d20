"""Unit tests of the dense PE golden model against a plain-Python reference."""
import numpy as np
import pytest

from trainforge.golden.dense_pe import dense_pe, wrap
from trainforge.hw.dense_pe import DensePE


def reference(a, b, clear, read, acc_width, signed):
    """Row-by-row Python integers, wrapped at the end of every row."""
    accumulator, results = 0, []
    modulus = 1 << acc_width
    for row in range(len(a)):
        if clear[row]:
            accumulator = 0
        accumulator = (accumulator + sum(int(x) * int(y) for x, y in zip(a[row], b[row]))) % modulus
        if read[row]:
            value = accumulator - modulus if signed and accumulator >= modulus // 2 else accumulator
            results.append(value)
    return results


@pytest.mark.parametrize("overrides", [
    {}, {"lanes": 1, "width": 4, "acc_width": 6, "signed": False},
    {"lanes": 64, "width": 32, "acc_width": 64}, {"lanes": 7, "width": 32, "acc_width": 64, "signed": False},
    {"lanes": 3, "width": 2, "acc_width": 2},
])
def test_matches_python_integers(overrides, seed):
    params = DensePE.PARAMS.resolve(**overrides)
    rng = np.random.default_rng(seed)
    width, lanes = params["width"], params["lanes"]
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if params["signed"] else (0, (1 << width) - 1)
    rows = 300
    a = rng.integers(low, high, (rows, lanes), endpoint=True)
    b = rng.integers(low, high, (rows, lanes), endpoint=True)
    clear = rng.random(rows) < 0.2
    read = rng.random(rows) < 0.4
    expected = reference(a, b, clear, read, params["acc_width"], params["signed"])
    actual = dense_pe(a, b, clear, read, **params)
    assert actual.tolist() == expected, f"seed {seed}: expected {expected[:6]}..., got {actual.tolist()[:6]}..."


def test_no_clear_starts_from_zero():
    a = np.array([[2, 3], [4, 5]])
    result = dense_pe(a, a, [False, False], [True, True], acc_width=16, signed=True)
    assert result.tolist() == [13, 13 + 41]


def test_wrap_reads_twos_complement():
    values = np.array([0, 1, 0x7F, 0x80, 0xFF, 0x1FF], dtype=np.uint64)
    assert wrap(values, 8, True).tolist() == [0, 1, 127, -128, -1, -1]
    assert wrap(values, 8, False).tolist() == [0, 1, 127, 128, 255, 255]
    assert wrap(np.array([1 << 63], dtype=np.uint64), 64, True).tolist() == [-(1 << 63)]
