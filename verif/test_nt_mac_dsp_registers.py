"""On the ECP5, the NeuroTrainer MAC's operand and partial-product registers are the MULT18X18D's own.

Each lane of ``nt_mac`` (and so of ``nt_pe``) has four 17x17 partial products, each with a
register per operand half and a registered product (two of its five pipeline stages). Elaborated
for the ULX3S (ECP5) they are :class:`~trainforge.hw.registered_multiplier.RegisteredMultiplier`\\ s
in their DSP form: the registers move into the MULT18X18D (``REG_INPUTA``, ``REG_INPUTB``,
``REG_OUTPUT``), so no fabric flip-flop sits on either side of a DSP block. The tests synthesize
one lane for the ECP5 both ways and look at what drives each DSP block's operand bits and what
reads its product bits; the expected counts come from the MAC's structure (4 multipliers per
lane, two 17-bit operands each), not from the generator.
"""
import pytest
from amaranth.back import rtlil

from ecp5_netlist import ecp5_netlist

from trainforge.hw.neurotrainer.mac import NTMAC
from trainforge.hw.synthesis import YOSYS_KEEP_REPLICAS

LANES = 1
#: Per lane: four partial products of 17-bit halves.
MULTIPLIERS = 4 * LANES


def _ulx3s():
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    return ULX3S_85F_Platform()


def _mac_rtlil(platform=None):
    # sr_lo (the default): the rounding offset makes every bit of the 32-bit sum an adder output.
    mac = NTMAC(lanes=LANES, rounding="sr_lo")
    return rtlil.convert(mac, name="top", platform=platform)


def _dsp_neighbours(netlist):
    """The number of MULT18X18D cells; per operand bit, the (cell type, port) driving it; per read
    product bit, the set of cell types reading it."""
    cells = netlist["cells"].values()
    drivers, readers = {}, {}
    for cell in cells:
        for port, bits in cell["connections"].items():
            for bit in bits:
                if cell["port_directions"][port] == "output":
                    drivers[bit] = (cell["type"], port)
                else:
                    readers.setdefault(bit, []).append((cell["type"], port))
    dsps = [cell for cell in cells if cell["type"] == "MULT18X18D"]
    operand_drivers = [drivers.get(bit, ("port", None)) for dsp in dsps
                       for port, bits in dsp["connections"].items() if port[0] in "AB" and port[1:].isdigit()
                       for bit in bits if isinstance(bit, int)]
    product_readers = [{cell for cell, _ in readers[bit]} for dsp in dsps for port, bits in dsp["connections"].items()
                       if port[0] == "P" and port[1:].isdigit() for bit in bits if bit in readers]
    return len(dsps), operand_drivers, product_readers


def test_ecp5_elaboration_instantiates_registered_dsp_blocks():
    text = _mac_rtlil(platform=_ulx3s())
    assert text.count("cell \\MULT18X18D") == MULTIPLIERS
    for register in ("INPUTA", "INPUTB", "OUTPUT"):
        assert text.count(f'parameter \\REG_{register}_CLK "CLK0"') == MULTIPLIERS, register
    assert text.count('parameter \\REG_PIPELINE_CLK "NONE"') == MULTIPLIERS


def test_generic_elaboration_has_no_dsp_instance():
    assert "MULT18X18D" not in _mac_rtlil()


def test_generic_form_has_fabric_registers_on_both_sides_of_each_dsp(tmp_path):
    """The checks can see fabric registers: in the generic form (what is simulated), synthesized for
    the ECP5, every operand bit of every DSP block comes from a flip-flop, and every product bit it
    uses goes to flip-flops only (the product register)."""
    dsps, operand_drivers, product_readers = _dsp_neighbours(ecp5_netlist(tmp_path, _mac_rtlil(), YOSYS_KEEP_REPLICAS))
    assert dsps == MULTIPLIERS
    assert len(operand_drivers) >= MULTIPLIERS * 2 * 17
    assert all(cell == "TRELLIS_FF" for cell, _ in operand_drivers), sorted(set(operand_drivers))
    assert product_readers and all(cells == {"TRELLIS_FF"} for cells in product_readers), product_readers


def test_ecp5_form_has_no_fabric_register_beside_any_dsp(tmp_path):
    dsps, operand_drivers, product_readers = _dsp_neighbours(ecp5_netlist(tmp_path, _mac_rtlil(platform=_ulx3s()), YOSYS_KEEP_REPLICAS))
    assert dsps == MULTIPLIERS
    assert len(operand_drivers) >= MULTIPLIERS * 2 * 17
    assert not any(cell == "TRELLIS_FF" for cell, _ in operand_drivers), sorted(set(operand_drivers))
    # The product register is the DSP's own: every product bit goes on to logic (the sums of stage 2),
    # none to flip-flops only.
    assert product_readers and all(cells - {"TRELLIS_FF"} for cells in product_readers), product_readers
