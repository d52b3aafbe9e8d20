"""On the ECP5, a CATERPILLAR PE's SRAM output register is loaded straight from the DP16KDs' read ports.

Yosys 0.70 maps the PE's Amaranth memory onto DP16KDs (``REGMODE NOREG``) with its read-first emulation's
multiplexer between the block and the output register ``sram_output`` (5.83 ns BRAM clock-to-out, a LUT and
the routing: ``cp_core``'s critical path). Elaborated for the ULX3S (ECP5) the PE instantiates the DP16KDs itself
(:mod:`trainforge.hw.ecp5_output_registered_bram`) with the multiplexer behind the register: a fabric register
(the default), or with ``CPPE.SRAM_REGISTER_IN_BLOCK`` the block's own (``REGMODE_B "OUTREG"``). The tests
synthesize one PE for the ECP5 each way and look at what reads the blocks' ``DOB`` bits and what drives the PE's
``mem_data`` port; the expected block counts come from the DP16KD's configurations (a 16-bit word of 8192 words:
eight 8192 x 2 blocks; 1024 words: one 1024 x 18 block), not from the generator. The simulated form (no
platform) is the Amaranth memory.
"""

import pytest
from amaranth.back import rtlil

from ecp5_netlist import ecp5_netlist

from trainforge.hw.caterpillar.pe import CPPE

WIDTH = 16


def _ulx3s():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    return ULX3S_85F_Platform()


class BlockRegisteredPE(CPPE):
    """The PE with the SRAM output register in the DP16KD (``REGMODE_B "OUTREG"``)."""
    SRAM_REGISTER_IN_BLOCK = True


def _pe_rtlil(sram_depth, platform=None, pe_class=CPPE):
    return rtlil.convert(pe_class(width=WIDTH, sram_depth=sram_depth), name="top", platform=platform)


def _brams_and_mem_data_sources(netlist):
    """The DP16KD cells' (DATA_WIDTH_B, REGMODE_B); per bit of the ``mem_data`` port, the cells found walking
    back from it through combinational cells: the set of (type, port) of the flip-flops, BRAM outputs and ports
    reached, and the number of combinational cells on the longest walk; the cell types reading any ``DOB`` bit."""
    drivers, readers = {}, {}
    for cell in netlist["cells"].values():
        for port, bits in cell["connections"].items():
            if cell["port_directions"][port] == "output":
                drivers.update({bit: (cell, port) for bit in bits})
            else:
                for bit in bits:
                    readers.setdefault(bit, set()).add(cell["type"])
    dob_readers = set()
    for cell in netlist["cells"].values():
        if cell["type"] == "DP16KD":
            for port, bits in cell["connections"].items():
                if port.startswith("DOB"):
                    for bit in bits:
                        dob_readers |= readers.get(bit, set())
    brams = [(int(cell["parameters"]["DATA_WIDTH_B"], 2), cell["parameters"]["REGMODE_B"])
             for cell in netlist["cells"].values() if cell["type"] == "DP16KD"]

    def sources(bit, depth=0):
        if bit not in drivers:
            return {("port or constant", None)}, depth
        cell, port = drivers[bit]
        if cell["type"] in ("TRELLIS_FF", "DP16KD"):
            return {(cell["type"], port)}, depth
        found, longest = set(), depth + 1
        for input_port, bits in cell["connections"].items():
            if cell["port_directions"][input_port] == "input":
                for input_bit in bits:
                    if isinstance(input_bit, int):
                        more, reached = sources(input_bit, depth + 1)
                        found |= more
                        longest = max(longest, reached)
        return found, longest

    return brams, [sources(bit) for bit in netlist["ports"]["mem_data"]["bits"]], dob_readers


@pytest.mark.parametrize("pe_class,regmode", [(CPPE, "NOREG"), (BlockRegisteredPE, "OUTREG")])
@pytest.mark.parametrize("sram_depth,blocks,block_width", [(8192, 8, 2), (1024, 1, 18)])
def test_ecp5_elaboration_instantiates_brams(sram_depth, blocks, block_width, pe_class, regmode):
    text = _pe_rtlil(sram_depth, platform=_ulx3s(), pe_class=pe_class)
    assert text.count("cell \\DP16KD") == blocks
    assert text.count(f'parameter \\REGMODE_B "{regmode}"') == blocks
    assert text.count(f"parameter \\DATA_WIDTH_B {block_width}") == blocks
    assert "$mem" not in text  # no Amaranth memory left for Yosys to map


def test_generic_elaboration_has_no_bram_instance():
    text = _pe_rtlil(8192)
    assert "DP16KD" not in text and "$mem" in text


def test_generic_form_reads_the_bram_through_logic_into_a_fabric_register(tmp_path):
    """The checks can see logic and a register: the generic form (what is simulated), synthesized for the ECP5,
    has its blocks' read data go into logic (Yosys's emulation multiplexer), and every bit of ``mem_data`` is a
    flip-flop's."""
    brams, mem_data, dob_readers = _brams_and_mem_data_sources(ecp5_netlist(tmp_path, _pe_rtlil(8192)))
    assert brams == [(2, "NOREG")] * 8
    assert mem_data == [({("TRELLIS_FF", "Q")}, 0)] * WIDTH
    assert dob_readers - {"TRELLIS_FF"}, dob_readers


def test_ecp5_form_loads_a_fabric_register_straight_from_the_brams(tmp_path):
    """The blocks' read data go to flip-flops only (the output register); every bit of ``mem_data`` is one cell
    (the bypass multiplexer) from flip-flops (the output register and the bypass registers)."""
    brams, mem_data, dob_readers = _brams_and_mem_data_sources(
        ecp5_netlist(tmp_path, _pe_rtlil(8192, platform=_ulx3s())))
    assert brams == [(2, "NOREG")] * 8
    assert dob_readers == {"TRELLIS_FF"}, dob_readers
    assert mem_data == [({("TRELLIS_FF", "Q")}, 1)] * WIDTH


def test_block_registered_form_reads_the_bram_output_register(tmp_path):
    """Every bit of ``mem_data`` is one combinational cell (the bypass multiplexer) away from a DP16KD's ``DOB``
    output (its output register) and the bypass flip-flops, with no fabric flip-flop between the BRAM and it."""
    brams, mem_data, _ = _brams_and_mem_data_sources(
        ecp5_netlist(tmp_path, _pe_rtlil(8192, platform=_ulx3s(), pe_class=BlockRegisteredPE)))
    assert brams == [(2, "OUTREG")] * 8
    for bit, (found, cells) in enumerate(mem_data):
        assert {cell for cell, _ in found} == {"DP16KD", "TRELLIS_FF"}, (bit, found)
        assert [port for cell, port in found if cell == "DP16KD"] == [f"DOB{bit % 2}"], (bit, found)
        assert cells == 1, (bit, cells)
