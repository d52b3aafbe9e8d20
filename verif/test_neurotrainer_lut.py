"""Unit tests of the LUT golden model: exactness at breakpoints, the linear-interpolation error bound, the CLI report."""
import json

import numpy as np
import pytest

from trainforge.golden.neurotrainer.lut import FUNCTIONS, interpolation_error, lut_table, nt_lut, reference
from trainforge.hw.neurotrainer.lut import NTLUT
from trainforge.errors import ParameterError

SMOOTH = ("tanh", "tanh_grad", "sigmoid", "sigmoid_grad")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_breakpoints_are_the_table(function):
    """At a segment start the output is exactly the rounded table entry."""
    table = lut_table(function, 6, 12, 12)
    x = np.arange(64, dtype=np.int64) * 1024 - (1 << 15)
    got = nt_lut(x, function=function, table_bits=6)
    assert np.array_equal(got, table[:64]), f"{function}: breakpoints {got[:4]} differ from table {table[:4]}"


@pytest.mark.parametrize("function", SMOOTH)
@pytest.mark.parametrize("table_bits", [4, 6, 8, 10])
def test_error_within_the_interpolation_bound(function, table_bits):
    """max |LUT - f| <= h^2/8 max|f''| (linear interpolation) + 0.5 LSB (table rounding) + 1 LSB (floor)."""
    report = interpolation_error(function, table_bits)
    h = 2.0 ** (16 - table_bits) / 2 ** 12
    grid = np.linspace(-8, 8, 200001)
    second = np.abs(np.gradient(np.gradient(reference(function, grid), grid), grid)).max()
    bound = (h * h / 8 * second) * 2 ** 12 + 1.5
    assert report["max_error_lsb"] <= bound, f"{function} {table_bits}: error {report['max_error_lsb']:.2f} > bound {bound:.2f} LSB"


def test_relu_is_exact_but_for_the_saturated_top_segment():
    report = interpolation_error("relu", 6)
    assert report["max_error_lsb"] <= 1.0 and report["worst_x"] > 7.75, report


@pytest.mark.parametrize("function", ["exp", "log", "tanh"])
def test_error_falls_with_the_table_size(function):
    errors = [interpolation_error(function, bits)["usage_rms_error_lsb"] for bits in (4, 6, 8, 10)]
    assert all(b < a for a, b in zip(errors, errors[1:])), f"{function}: RMS errors {errors} do not fall"


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="function"):
        NTLUT(function="gelu")
    with pytest.raises(ParameterError, match="table_bits"):
        NTLUT(table_bits=13)


def test_cli_writes_the_error_table(tmp_path):
    from trainforge.cli import main
    assert main(["neurotrainer", "lut-error", "--table-bits", "4,8", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "lut_error.json").read_text())
    assert {(row["function"], row["table_bits"]) for row in report["rows"]} == \
        {(f, b) for f in FUNCTIONS for b in (4, 8)}
    assert main(["neurotrainer", "lut-error", "--table-bits", "0", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()
