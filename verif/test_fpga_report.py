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


def test_the_table_names_a_seed():
    row = {"block": "td_pe", "params": {"lanes": 4}, "lut4": 3068, "ff_block": 1545, "ff": 1846, "mult18": 4,
           "bram": 0, "fmax_mhz": 106.1, "meets_board_clock": True}
    table = markdown_table([row, {**row, "seed": 3}])
    rows = [line for line in table.splitlines() if line.startswith("| td_pe")]
    assert "seed" not in rows[0] and "lanes=4, nextpnr seed 3 |" in rows[1], table


def test_the_platform_is_constrained_to_the_goal():
    from trainforge.fpga import TARGET_CLOCK_MHZ, _platform

    platform = _platform()
    assert TARGET_CLOCK_MHZ == 100.0
    assert platform.default_clk_frequency == 100e6  # the board's own clock resource says 25 MHz


def test_a_bad_seed_is_refused_before_any_work(tmp_path, capsys):
    from trainforge.cli import main

    out = tmp_path / "qor.json"
    assert main(["fpga", "td_pe", "--seed", "0", "--out", str(out)]) == 2
    assert "--seed" in capsys.readouterr().err and not out.exists()


def _stamp(component, build_dir):
    from trainforge.fpga import build_stamp, ecp5_plan
    from trainforge.hw.registered_io import RegisteredIO

    return build_stamp(ecp5_plan(RegisteredIO(component), build_dir).files)


def test_a_build_is_stamped_with_its_ecp5_form_not_its_simulated_verilog(tmp_path, monkeypatch):
    # cp_pe elaborates its SRAM as DP16KD instances for the ECP5 only: where the output register sits changes the
    # FPGA build and not the simulated Verilog. A stamp of the Verilog (the flow's before) reused the other build.
    from trainforge.emit import emit
    from trainforge.hw.caterpillar.pe import CPPE
    from trainforge.hw.registry import BLOCKS

    block = BLOCKS["cp_pe"]
    fabric = _stamp(block.component(), tmp_path / "a")
    assert _stamp(block.component(), tmp_path / "b") == fabric, "the same design in another folder is another build"
    verilog = emit("cp_pe").text
    monkeypatch.setattr(CPPE, "SRAM_REGISTER_IN_BLOCK", True)
    assert emit("cp_pe").text == verilog
    assert _stamp(block.component(), tmp_path / "a") != fabric, "an ECP5-only change reuses the old build"


def test_the_stamp_ignores_source_lines_and_sees_the_rest():
    from trainforge.fpga import STAMPED_PLAN_FILES, build_stamp

    files = {name: f"{name} text\n" for name in STAMPED_PLAN_FILES}
    files["top.il"] = 'attribute \\src "/a/hw/x.py:10"\nmodule \\top\n  attribute \\src "/a/hw/x.py:12"\n  wire \\w\nend\n'
    moved = dict(files, **{"top.il": files["top.il"].replace("/a/hw/x.py:1", "/b/hw/x.py:3")})
    assert build_stamp(moved) == build_stamp(files)
    for name in STAMPED_PLAN_FILES:
        assert build_stamp(dict(files, **{name: files[name] + "x"})) != build_stamp(files), name
