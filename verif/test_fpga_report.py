"""The nextpnr-ecp5 log parser and the QoR table (no FPGA tools needed)."""
from trainforge.fpga import BOARD_CLOCK_MHZ, markdown_table, parse_nextpnr_log

# The shape of a nextpnr-ecp5 log: utilisation and Fmax after placement, then again after routing.
LOG = """
Info: Device utilisation:
Info:          TRELLIS_COMB:   5100/83640     6%
Info:            TRELLIS_FF:   1700/83640     2%
Info:            MULT18X18D:     18/  156    11%
Info:                DP16KD:    130/  208    62%
Info: Max frequency for clock '$glbnet$block.clk': 31.50 MHz (PASS at 25.00 MHz)
Info: Device utilisation:
Info:          TRELLIS_COMB:   5200/83640     6%
Info:            TRELLIS_FF:   1697/83640     2%
Info:            MULT18X18D:     18/  156    11%
Info:                DP16KD:    130/  208    62%
ERROR: Max frequency for clock '$glbnet$block.clk': 22.22 MHz (FAIL at 25.00 MHz)
"""


def test_routed_figures_are_the_last_ones():
    figures = parse_nextpnr_log(LOG)
    assert figures["lut4"] == 5200 and figures["lut4_available"] == 83640, figures
    assert figures["ff"] == 1697 and figures["mult18"] == 18 and figures["bram"] == 130, figures
    assert figures["fmax_mhz"] == 22.22, figures


def test_missing_resources_are_zero_and_missing_fmax_is_none():
    figures = parse_nextpnr_log("Info: nothing here\n")
    assert figures["lut4"] == 0 and figures["lut4_available"] is None and figures["fmax_mhz"] is None


def test_table_flags_a_block_below_the_board_clock():
    row = {"block": "cp_core", "params": {"n_r": 4}, "lut4": 5200, "ff_block": 1461, "ff": 1697, "mult18": 18,
           "bram": 130, "fmax_mhz": 22.22, "meets_board_clock": False}
    table = markdown_table([row, {**row, "block": "dense_pe", "fmax_mhz": 126.4, "meets_board_clock": True}])
    lines = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert f"22.2 (below the {BOARD_CLOCK_MHZ:.0f} MHz board clock)" in lines["cp_core"], table
    assert "126.4 |" in lines["dense_pe"] and "below" not in lines["dense_pe"], table
