"""A self-checking Verilog testbench that plays per-cycle input vectors, for blocks without streams (``cp_pe``).

:mod:`trainforge.stream_bench` drives a block's stream ports from payload
lists; a block whose inputs are plain per-cycle controls (CATERPILLAR's PE:
the core's sequencer drives ``en``, the SRAM write port and the MAC controls
every cycle) has no handshake to drive. Python then flattens whole scenarios
into one *vector* per clock cycle, ``rst`` included (the reset before a
scenario, the unchecked traffic and the reset of a reset mid-stream, the
memory writes, the controls of every cycle with the scenario's ``en``
pattern), and the expected outputs of the cycles it marks; the testbench only
applies the vectors and compares.

Timing, as the cocotb testbenches drive a block: vector ``i`` is applied
after rising edge ``i`` (a non-blocking assignment, like a cocotb write after
the edge) and sampled by the block at edge ``i + 1``; when it is marked
``check``, the checked outputs after that edge (read at edge ``i + 2``, before
it updates them) are compared with the next expected entry. Only registered
outputs can be checked this way; the blocks played so have them.

Vector fields (:func:`vector_layout`): the block's inputs, then the flags
``start`` (first vector of a scenario: scenarios are counted by it and a
mismatch names its scenario), ``check``, ``transaction`` (a checked input
transaction, counted as one input beat), ``before_reset`` (an input
transaction of unchecked traffic before a reset mid-stream: counted as one
input and one output beat, as the stream testbench counts the beats accepted
before a reset) and ``reset`` (first vector of a reset mid-stream: counted).
The checked outputs are counted as output beats. A scenario with any
difference counts as one mismatch; the first ones are written out in full.

Batch files: ``sizes.hex`` (vectors, expected entries), ``vectors.hex`` and
``expected.hex``. The result file has the format of :func:`trainforge.stream_bench.run`,
which reads it (``in 0``: input transactions, ``out 0``: checked output
entries, ``payload`` lines for the mismatches).
"""
import pathlib

from .emit import emit_cached
from .errors import ParameterError
from .hw.registry import BLOCKS
from .stream_bench import (DETAILED_MISMATCHES, MAX_MISMATCHES, MODULE, HeaderLayout, StreamPort, build_folder)

__all__ = ["FLAGS", "DEFAULT_DEPTH", "vector_layout", "expected_layout", "testbench_verilog", "build", "write_batch"]

#: The flag fields of a vector, after the block's inputs.
FLAGS = ("start", "check", "transaction", "before_reset", "reset")
#: Vectors (and expected entries) per batch; the caller splits a longer run into batches.
DEFAULT_DEPTH = 1 << 18


def _ports(emitted, checked):
    """``(inputs, outputs, others)``: ``(name, width)`` of the block's inputs but ``clk``, of its ``checked``
    outputs and of its other outputs (connected, not compared)."""
    inputs = [(port["name"], port["width"]) for port in emitted.ports
              if port["direction"] == "input" and port["name"] != "clk"]
    outputs = {port["name"]: port["width"] for port in emitted.ports if port["direction"] == "output"}
    unknown = [name for name in checked if name not in outputs]
    if unknown or not checked:
        raise ParameterError(f"checked outputs: {', '.join(unknown) or 'none'} is not among the block's outputs "
                             f"{', '.join(outputs)}")
    return (inputs, [(name, outputs[name]) for name in checked],
            [(name, width) for name, width in outputs.items() if name not in checked])


def vector_layout(inputs):
    """The :class:`~trainforge.stream_bench.HeaderLayout` of one vector: the block's inputs, then :data:`FLAGS`."""
    return HeaderLayout((), (), [*inputs, *((flag, 1) for flag in FLAGS)])


def expected_layout(outputs):
    """The layout of one expected entry: the checked outputs as the Verilog concatenation ``{first, ..., last}``
    (the last at bit 0)."""
    return HeaderLayout((), (), list(reversed(outputs)))


def testbench_verilog(block_module, inputs, outputs, depth=DEFAULT_DEPTH, others=()):
    """The Verilog-2005 text of the vector testbench (module ``trainforge_stream_bench``, input ``clk``).

    Parameters
    ----------
    block_module : str
        The block's top module name.
    inputs : list of (str, int)
        The block's inputs but ``clk`` (``rst`` among them), as the vectors hold them.
    outputs : list of (str, int)
        The checked outputs, as the expected entries hold them.
    depth : int
        Vectors (and expected entries) the testbench's memories hold.
    others : list of (str, int)
        The block's other outputs: connected to wires, not compared.
    """
    vector, entry = vector_layout(inputs), expected_layout(outputs)
    connections = [".clk(clk)"] + [f".{name}({name})" for name, _ in [*inputs, *outputs, *others]]
    got = "{" + ", ".join(name for name, _ in outputs) + "}"
    lines = [
        "// Generated by trainforge.vector_bench: the fast random regression's per-cycle vector testbench.",
        f"module {MODULE} (input wire clk);",
        f"  localparam DEPTH = {depth};",
        f"  localparam MAX_MISMATCHES = {MAX_MISMATCHES};",
        f"  localparam DETAILED = {DETAILED_MISMATCHES};",
        f"  reg [{vector.width - 1}:0] vectors [0:DEPTH - 1];",
        f"  reg [{entry.width - 1}:0] expected [0:DEPTH - 1];",
        "  reg [31:0] sizes [0:1];",
        *(f"  reg [{width - 1}:0] {name};" for name, width in inputs),
        *(f"  wire [{width - 1}:0] {name};" for name, width in [*outputs, *others]),
        "  reg [31:0] applied, compared, scenario, bad_scenario, check_scenario_1, check_scenario_2;",
        f"  wire [{vector.width - 1}:0] next_vector = vectors[applied];",
        "  reg [31:0] beat, checked_scenario, beat_in_scenario;  // beat: the checked entry's index in its scenario",
        "  reg check_1, check_2, started, done, checked_any;",
        "  reg [1:0] draining;",
        "  reg [63:0] transactions, outputs, scenarios, mismatches, details, resets, before_reset, cycles;",
        "  integer result;",
        f"  {block_module} dut ({', '.join(connections)});",
        "  initial begin",
        "    $readmemh(\"sizes.hex\", sizes);",
        "    if (sizes[0] > DEPTH || sizes[1] > DEPTH) begin $display(\"batch too large\"); $finish; end",
        "    if (sizes[0] != 0) $readmemh(\"vectors.hex\", vectors, 0, sizes[0] - 1);",
        "    if (sizes[1] != 0) $readmemh(\"expected.hex\", expected, 0, sizes[1] - 1);",
        *(f"    {name} = {int(name == 'rst')};" for name, _ in inputs),
        "    result = $fopen(\"result.txt\", \"w\");",
        "    applied = 0; compared = 0; scenario = 0; bad_scenario = 32'hFFFFFFFF; started = 0; done = 0;",
        "    check_1 = 0; check_2 = 0; check_scenario_1 = 0; check_scenario_2 = 0; draining = 0; beat = 0;",
        "    checked_scenario = 0; checked_any = 0;",
        "    transactions = 0; outputs = 0; scenarios = 0; mismatches = 0; details = 0; resets = 0;",
        "    before_reset = 0; cycles = 0;",
        "  end",
        "",
        "  always @(posedge clk) begin",
        "    cycles <= cycles + 1;",
        "    // the vector sampled at this edge was marked check one vector ago: compare what this edge's",
        "    // predecessor left in the registered outputs (check_2 belongs to the vector sampled at the last edge)",
        "    if (check_2) begin",
        "      beat_in_scenario = checked_any && check_scenario_2 == checked_scenario ? beat + 1 : 0;",
        "      beat <= beat_in_scenario; checked_scenario <= check_scenario_2; checked_any <= 1;",
        "      outputs <= outputs + 1;",
        "      compared <= compared + 1;",
        f"      if ({got} !== expected[compared] && bad_scenario != check_scenario_2) begin",
        "        bad_scenario <= check_scenario_2;",
        "        mismatches <= mismatches + 1;",
        "        if (details < DETAILED) begin",
        f"          $fdisplay(result, \"payload %0d 0 %0d %h %h\", check_scenario_2, beat_in_scenario, expected[compared], {got});",
        "          details <= details + 1;",
        "        end",
        "      end",
        "    end",
        "    check_2 <= check_1; check_scenario_2 <= check_scenario_1;",
        "    if (applied < sizes[0] && mismatches < MAX_MISMATCHES) begin",
        *(f"      {name} <= next_vector{vector.slice(name)};" for name, _ in inputs),
        f"      check_1 <= next_vector{vector.slice('check')};",
        f"      if (next_vector{vector.slice('start')}) begin",
        "        scenarios <= scenarios + 1;",
        "        if (started) scenario <= scenario + 1;",
        "        check_scenario_1 <= started ? scenario + 1 : 0;",
        "        started <= 1;",
        "      end else check_scenario_1 <= scenario;",
        f"      transactions <= transactions + next_vector{vector.slice('transaction')};",
        f"      before_reset <= before_reset + 2 * next_vector{vector.slice('before_reset')};",
        f"      resets <= resets + next_vector{vector.slice('reset')};",
        "      applied <= applied + 1;",
        "    end else begin",
        "      check_1 <= 0;",
        "      draining <= draining + 1;",
        "      if (draining == 2'd2 && !done) begin",
        "        done <= 1;",
        "        $fdisplay(result, \"in 0 %0d\", transactions);",
        "        $fdisplay(result, \"out 0 %0d\", outputs);",
        "        $fdisplay(result, \"scenarios %0d\", scenarios);",
        "        $fdisplay(result, \"mismatches %0d\", mismatches);",
        "        $fdisplay(result, \"resets %0d\", resets);",
        "        $fdisplay(result, \"before_reset %0d\", before_reset);",
        "        $fdisplay(result, \"cycles %0d\", cycles);",
        "        $fdisplay(result, \"end\");",
        "        $fclose(result);",
        "        $finish;",
        "      end",
        "    end",
        "  end",
        "endmodule",
        "",
    ]
    return "\n".join(lines)


def build(block_name, params, simulator, checked, verilog=None, depth=DEFAULT_DEPTH, tag=""):
    """Build (once) the vector testbench of one block; return its :class:`~trainforge.stream_bench.BenchBuild`.

    Parameters
    ----------
    block_name : str
        A registered block.
    params : dict
        Its parameter overrides (validated against its schema).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    checked : sequence of str
        The outputs compared at the marked cycles (registered outputs of the block).
    verilog : str, optional
        The block's Verilog instead of its emitted one (a deliberately broken block, for the tests).
    depth : int
        Vectors and expected entries per batch.
    tag : str
        Added to the build folder's name (keeps a broken block's build apart).

    The build's ``inputs`` is one pseudo-port ``inputs`` (the vectors marked ``transaction``), its ``outputs`` one
    named after the checked outputs (``{acc, red}``), its ``header_layout`` the vector layout.
    """
    params = BLOCKS[block_name].resolve(**params)
    emitted = emit_cached(block_name, **params)
    inputs, outputs, others = _ports(emitted, tuple(checked))
    text = testbench_verilog(block_name, inputs, outputs, depth, others)
    entry = expected_layout(outputs)
    name = "{" + ", ".join(name for name, _ in outputs) + "}"
    return build_folder(block_name, emitted, simulator, text, (StreamPort("inputs", "in", 1),),
                        (StreamPort(name, "out", entry.width),), depth, depth, verilog=verilog,
                        tag="-".join(part for part in ("vectors", tag) if part), header=vector_layout(inputs),
                        checked=(name,))


def write_batch(folder, bench, vectors, expected):
    """Write one batch (packed vectors and expected entries, in order) into ``folder``; the result file is removed."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if len(vectors) > bench.depth or len(expected) > bench.depth:
        raise ParameterError(f"batch size: {len(vectors)} vectors and {len(expected)} expected entries; allowed: at "
                             f"most the testbench's {bench.depth} of each")
    (folder / "sizes.hex").write_text(f"{len(vectors):x}\n{len(expected):x}\n")
    (folder / "vectors.hex").write_text("".join(f"{word:x}\n" for word in vectors))
    (folder / "expected.hex").write_text("".join(f"{word:x}\n" for word in expected))
    (folder / "result.txt").unlink(missing_ok=True)
