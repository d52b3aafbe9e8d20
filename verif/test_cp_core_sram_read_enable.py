"""On the ECP5, each PE SRAM of ``cp_core`` has its read enable from a flip-flop of its own.

``cp_core``'s 100.7 MHz placement (``--seed 2``) had its critical path from the read-stage register
``exec_read_owner`` through the LUT that made a PE column's read enable and 7.95 ns of routing to a far PE's
DP16KD ``CEB`` (``hw/caterpillar/README.md``, section "`cp_core`: the PE SRAMs' own DP16KD output register").
The core now registers each PE's read enable (a register replica, :mod:`trainforge.hw.synthesis`, computed in the
issue cycle from the decisions the read-stage registers take), so that the placer can put it beside the PE's blocks.
The test synthesizes a small core for the ECP5 as ``trainforge fpga`` does (the replicas' ``keep`` right after
reading) and walks the netlist: every DP16KD's ``CEB`` is a flip-flop's output, and the PEs' blocks are enabled by
as many flip-flops as there are PEs, each enabling the blocks of one PE only.
"""
import re

from amaranth.back import rtlil

from ecp5_netlist import ecp5_netlist

from trainforge.fpga import YOSYS_AFTER_READ
from trainforge.hw.caterpillar.core import CPCore

N_R = 2
SRAM_DEPTH = 1024  # one 1024 x 18 DP16KD per PE


def _ecp5_core_netlist(tmp_path):
    """A ``cp_core`` of ``N_R`` x ``N_R`` PEs elaborated for the ULX3S, synthesized for the ECP5: the JSON top."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    core = CPCore(n_r=N_R, sram_depth=SRAM_DEPTH, max_blocks=4)
    return ecp5_netlist(tmp_path, rtlil.convert(core, name="top", platform=ULX3S_85F_Platform()), YOSYS_AFTER_READ,
                        timeout=1200)


def test_every_pe_sram_read_enable_is_a_flip_flop_of_its_own_pe(tmp_path):
    netlist = _ecp5_core_netlist(tmp_path)
    drivers = {}
    for name, cell in netlist["cells"].items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"][port] == "output":
                drivers.update({bit: (name, cell["type"], port) for bit in bits})
    pe_of_driver = {}  # the CEB driver -> the PEs whose blocks it enables
    blocks = 0
    for name, cell in netlist["cells"].items():
        if cell["type"] != "DP16KD":
            continue
        pe = re.match(r"pe_(\d+)_(\d+)_sram_\d+$", name)
        assert pe, name
        blocks += 1
        enable, = cell["connections"]["CEB"]
        assert isinstance(enable, int), (name, enable)  # a net, not a constant
        driver, driver_type, driver_port = drivers[enable]
        assert (driver_type, driver_port) == ("TRELLIS_FF", "Q"), (name, driver, driver_type)
        pe_of_driver.setdefault(driver, set()).add(pe.groups())
    assert blocks == N_R * N_R  # one block per PE at this depth: the walk saw every PE
    assert len(pe_of_driver) == N_R * N_R, pe_of_driver
    assert all(len(pes) == 1 for pes in pe_of_driver.values()), pe_of_driver
