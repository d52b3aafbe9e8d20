"""A self-checking Verilog testbench of NeuroTrainer's iBuffer and layer sequencer (``nt_sequencer``), for the fast
random regression.

The sequencer is more than streams: besides its stream ports (``i_load``,
``i_start`` and a program queue stream per PMAG and PE) it has the system's
``system_idle`` input and the ``o_config``, ``o_layer`` and ``busy`` outputs, so
the plain stream testbench (:mod:`trainforge.stream_bench`) cannot drive it.
This one plays the sequencer's scenario table (``verif/scenarios/nt_sequencer.py``)
the way its cocotb testbench (``verif/tb_nt_sequencer.py``) does, with Python out
of the cycle loop, and checks what that testbench checks:

- every queue's words as ``(run, layer, word)`` against the table, in order
  (run: the ``i_start`` the word belongs to, counted from 0; layer: ``o_layer``
  in the cycle the word is taken);
- every word taken while ``busy``, in a run, in a layer of that run, with
  ``o_config`` that layer's config (:data:`RULES` 1);
- each layer's ``o_config`` in the layer's last ``busy`` cycle, the layers in
  order, none missing and none extra (the expectation stream ``o_config``);
- no word of a layer taken before the system was idle after the previous
  layer's last word of the same run (:data:`RULES` 2).

The system's ``idle`` is modelled as in the cocotb testbench: it falls in every
cycle a program word is taken and rises ``system_idle_delay`` cycles after the
last one (``idle`` in scenario cycle ``n`` is ``n - last > delay``, ``last``
the latest cycle in which a word was taken; high before the first).

A scenario, after the reset: ``i_load`` offers the loads under the
scenario's ``valid`` pattern; once every load is taken, ``i_start`` offers the
runs (every cycle); each queue's ``ready`` follows the scenario's pattern. The
scenario ends when every load and run was taken, ``busy`` is low, every
expected word arrived and every layer was seen; then eight more cycles must
bring no word. Resets mid-stream, timeouts, the drain and the batch and result
files are those of :mod:`trainforge.stream_bench`, whose
:func:`~trainforge.stream_bench.run` reads the result; the ``rule`` detail
lines are ``rule <scenario> <cycle> <rule> <value>``.

Batch files: ``sizes.hex`` (scenarios, then the entries of each ``in<k>.hex``
and ``exp<k>.hex``); ``scenarios.hex``; ``in0.hex`` the loads, ``in1.hex`` the
runs (layers per ``i_start``); ``exp<k>.hex`` for each queue ``k`` its words,
each ``{run[15:0], layer[15:0], word}``, and ``exp<queues>.hex`` the layers'
configs in run and layer order, each ``{run[15:0], layer[15:0], config}``.
"""
from .emit import emit_cached
from .hw.registry import BLOCKS
from .spec.neurotrainer import sequencer as spec
from .stream_bench import (DEFAULT_DEPTH, DRAIN_CYCLES, PATTERN_BITS, RESET_CYCLES, HeaderLayout, StreamPort,
                           batch_loading, build_folder, done_state_and_end, expectation_reset_state,
                           input_stream_declarations, mismatch_statements, module_head, scenario_declarations,
                           start_and_load_state)

__all__ = ["BLOCK", "RULES", "DEFAULT_SCENARIOS", "KEY_BITS", "queue_ports", "checked_streams",
           "header_layout", "testbench_verilog", "build"]

#: The block this testbench drives.
BLOCK = "nt_sequencer"
#: The rules checked in every cycle a word is taken, by the number a ``rule`` detail line gives.
RULES = {
    1: "a program word taken while not busy, outside a run, in a layer beyond the run's, or with o_config not its "
       "layer's (value: {busy, run, layer, o_config})",
    2: "a layer's word taken before the system was idle after the previous layer's last word (value: cycles after it)",
}
#: Scenarios per batch (a pass of the table has 7); the payload memories have the stream testbench's
#: ``DEFAULT_DEPTH`` entries (1 << 15 instead made no difference: 40 000 transactions of seed 7 took 5.98 and 5.92
#: CPU-seconds on Icarus, 0.55 and 0.57 on Verilator).
DEFAULT_SCENARIOS = 1 << 10
#: Bits of the run and of the layer in front of each expected word and config.
KEY_BITS = 16
#: The name of the expectation stream of the layers' configs.
CONFIG_STREAM = "o_config"


def _widths(emitted):
    return {port["name"]: port["width"] for port in emitted.ports}


def queue_ports(emitted):
    """The queue streams as the Verilog names them, in queue order (read PMAGs, write PMAGs, PEs)."""
    pes = emitted.params["pes"]
    widths = _widths(emitted)
    names = ([f"o_read_program__{v}" for v in range(pes + 1)] + [f"o_write_program__{v}" for v in range(pes + 1)]
             + [f"o_pe_program__{i}" for i in range(pes)])
    return [StreamPort(name, "out", widths[f"{name}__payload"]) for name in names]


def input_ports(emitted):
    widths = _widths(emitted)
    return [StreamPort(name, "in", widths[f"{name}__payload"]) for name in ("i_load", "i_start")]


def checked_streams(pes):
    """Names of the expectation streams, in ``exp<k>.hex`` order: each queue's words, then the layers' configs."""
    return ([f"o_read_program__{v}" for v in range(pes + 1)] + [f"o_write_program__{v}" for v in range(pes + 1)]
            + [f"o_pe_program__{i}" for i in range(pes)] + [CONFIG_STREAM])


def header_layout(pes):
    """The fields of one scenario's header word (:class:`~trainforge.stream_bench.HeaderLayout`).

    Per input ``k`` (``i_load``, ``i_start``): ``in<k>_count``, ``in<k>_length``, ``in<k>_pattern`` (``valid``);
    per queue ``k``: ``out<k>_length``, ``out<k>_pattern`` (``ready``); per expectation stream ``k``:
    ``exp<k>_count``; ``delay`` (the system's idle delay), ``reset_after``, ``timeout``.
    """
    queues = spec.queue_count(pes)
    fields = []
    for k in range(2):
        fields += [(f"in{k}_count", 32), (f"in{k}_length", 8), (f"in{k}_pattern", PATTERN_BITS)]
    for k in range(queues):
        fields += [(f"out{k}_length", 8), (f"out{k}_pattern", PATTERN_BITS)]
    fields += [(f"exp{k}_count", 32) for k in range(queues + 1)]
    fields += [("delay", 16), ("reset_after", 32), ("timeout", 32)]
    return HeaderLayout((), (), fields)


def testbench_verilog(emitted, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS):
    """The Verilog-2005 text of the sequencer's self-checking testbench (module ``trainforge_stream_bench``)."""
    pes = emitted.params["pes"]
    widths = _widths(emitted)
    header = header_layout(pes)
    inputs, outputs = input_ports(emitted), queue_ports(emitted)
    queues = len(outputs)
    config_bits, layer_bits = widths["o_config"], widths["o_layer"]
    key = KEY_BITS

    def f(name):
        return f"header{header.slice(name)}"

    lines = [
        *module_head("trainforge.sequencer_bench: the fast random regression's self-checking testbench of "
                     "nt_sequencer.", depth, scenarios, header.width, len(inputs) + queues + 1),
        *scenario_declarations(),
        "  // the system's idle and the sequencer's other ports",
        "  reg system_idle;",
        f"  wire [{config_bits - 1}:0] o_config;",
        f"  wire [{layer_bits - 1}:0] o_layer;",
        "  wire busy;",
        "  reg idle_seen;                 // a word was taken in this scenario (else the system is idle)",
        "  reg [31:0] idle_last;          // the last cycle a word was taken",
        f"  reg [{key - 1}:0] starts, run, layer, run_layers;   // runs accepted; the running one's layers",
        "  reg [31:0] run_base, next_base; // the running run's first layer among the scenario's layers",
        "  reg take, close, wrong;",
        "  reg took;                      // a word of this run was taken before (take_layer, take_cycle)",
        f"  reg [{key - 1}:0] take_starts, take_layer;",
        "  reg [31:0] take_cycle;",
        "  reg open;                      // a layer is being observed (busy, in a run): open_* are its last cycle's",
        f"  reg [{key - 1}:0] open_run, open_layer;",
        f"  reg [{config_bits - 1}:0] open_config;",
        "  reg [31:0] closed;             // layers seen to their end in this scenario",
        f"  reg [{2 * key + config_bits - 1}:0] want_config;",
    ]
    for k, port in enumerate(inputs):
        lines += input_stream_declarations(k, port.name, port.width)
    for k, port in enumerate(outputs):
        lines += [
            f"  // output stream {port.name}",
            f"  wire [{port.width - 1}:0] {port.name}__payload;",
            f"  wire {port.name}__valid;",
            f"  reg {port.name}__ready;",
            f"  reg [7:0] out{k}_index;",
            f"  reg out{k}_fire;",
            f"  reg [63:0] out{k}_beats;",
            f"  reg [31:0] out{k}_beats_scenario;",
        ]
    streams = checked_streams(pes)
    entry_widths = [2 * key + port.width for port in outputs] + [2 * key + config_bits]
    for k, (name, width) in enumerate(zip(streams, entry_widths)):
        lines += [
            f"  // expectation stream {name}: {{run[{key - 1}:0], layer[{key - 1}:0], payload}}",
            f"  reg [{width - 1}:0] exp{k}_memory [0:DEPTH - 1];",
            f"  reg [31:0] exp{k}_base, exp{k}_received;",
        ]
    connections = [".clk(clk)", ".rst(rst)", ".system_idle(system_idle)", ".o_config(o_config)",
                   ".o_layer(o_layer)", ".busy(busy)"]
    for port in inputs + outputs:
        connections += [f".{port.name}__{s}({port.name}__{s})" for s in ("payload", "valid", "ready")]
    lines.append(f"  {BLOCK} dut ({', '.join(connections)});")

    files = [(f"in{k}.hex", f"in{k}_memory") for k in range(len(inputs))]
    files += [(f"exp{k}.hex", f"exp{k}_memory") for k in range(len(streams))]
    lines += ["  initial begin", *batch_loading(files)]
    for k, port in enumerate(inputs):
        lines.append(f"    {port.name}__valid = 0; {port.name}__payload = 0; in{k}_base = 0; in{k}_beats = 0;")
    for k, port in enumerate(outputs):
        lines.append(f"    {port.name}__ready = 0; out{k}_beats = 0; out{k}_beats_scenario = 0;")
    lines += [f"    exp{k}_base = 0;" for k in range(len(streams))]
    lines += ["    system_idle = 1;", *start_and_load_state(header)]
    own_reset = ["      cycle <= 0; system_idle <= 1; idle_seen <= 0; starts <= 0; run_layers <= 0; run_base <= 0;",
                  "      next_base <= 0; took <= 0; open <= 0; closed <= 0;"]
    lines += expectation_reset_state(own_reset, inputs, outputs, len(streams))

    mismatch = mismatch_statements

    def expect(k, got, fire, beat):
        """Check ``got`` against the next entry (number ``beat`` of the scenario) of expectation stream ``k``."""
        expected = f"exp{k}_memory[exp{k}_base + {beat}]"
        return [f"      if ({fire} && !pre) begin",
                f"        if ({beat} >= {f(f'exp{k}_count')}) begin",
                *mismatch(f"\"extra %0d {k} %0d %h\", scenario, {beat}, {got}"),
                f"        end else if ({got} !== {expected}) begin",
                *mismatch(f"\"payload %0d {k} %0d %h %h\", scenario, {beat}, {expected}, {got}"),
                "        end",
                "      end"]

    def rule(number, condition, value):
        return [f"      if ({condition}) begin", *mismatch(f"\"rule %0d %0d {number} %h\", scenario, cycle, {value}"),
                "      end"]

    config_stream = queues
    body = ["      cycle <= cycle + 1;",
            "      wrong = 0;",
            "      run = starts - 1;",
            "      layer = o_layer;"]
    for k, port in enumerate(inputs):
        body += [f"      in{k}_fire = {port.name}__valid && {port.name}__ready;",
                 f"      in{k}_next = in{k}_sent + in{k}_fire;"]
    for k, port in enumerate(outputs):
        body.append(f"      out{k}_fire = {port.name}__valid && {port.name}__ready;")
    body.append("      take = " + " || ".join(f"out{k}_fire" for k in range(queues)) + ";")
    # Every word as (run, layer, word), in order per queue.
    for k, port in enumerate(outputs):
        body += expect(k, f"{{run, layer, {port.name}__payload}}", f"out{k}_fire", f"exp{k}_received")
        body.append(f"      exp{k}_received <= exp{k}_received + out{k}_fire;")
    # Rule 1: a word only while busy, in a layer of a run, under that layer's config.
    body += [f"      want_config = exp{config_stream}_memory[exp{config_stream}_base + run_base + layer];"]
    body += rule(1, f"take && !pre && (!busy || starts == 0 || layer >= run_layers || "
                    f"o_config !== want_config[{config_bits - 1}:0])",
                 "{busy, run, layer, o_config}")
    # Rule 2: a layer's first word after the system was idle behind the previous layer's last word (same run).
    body += rule(2, "take && !pre && took && take_starts == starts && take_layer != layer && "
                    f"cycle - take_cycle <= {f('delay')}", "cycle - take_cycle")
    body += ["      if (take) begin",
             "        took <= 1; take_starts <= starts; take_layer <= layer; take_cycle <= cycle;",
             "      end"]
    # The system's idle in the next cycle.
    body += [f"      system_idle <= take ? 1 > {f('delay')} : !idle_seen || cycle + 1 - idle_last > {f('delay')};",
             "      if (take) begin idle_seen <= 1; idle_last <= cycle; end"]
    # Each layer's config in its last busy cycle: a layer ends when busy falls or (run, layer) changes.
    body += ["      close = open && (!busy || starts == 0 || run != open_run || layer != open_layer);"]
    body += expect(config_stream, "{open_run, open_layer, open_config}", "close", "closed")
    body += ["      closed <= closed + close;",
             "      open <= busy && starts != 0;",
             "      open_run <= run; open_layer <= layer; open_config <= o_config;"]
    # Runs: the running run's layers and its place among the scenario's layers.
    body += ["      if (in1_fire) begin",
             "        starts <= starts + 1; run_layers <= i_start__payload;",
             "        run_base <= next_base; next_base <= next_base + i_start__payload;",
             "      end"]
    # Drive the next cycle: the loads, then (every load taken) the runs; the queues' ready from their patterns.
    for k, port in enumerate(inputs):
        p = port.name
        after_loads = " && in0_next == " + f("in0_count") if k == 1 else ""
        body += [
            f"      in{k}_sent <= in{k}_next;",
            f"      if (!{p}__valid || in{k}_fire) begin",
            f"        if (state == RUN{after_loads} && in{k}_next < {f(f'in{k}_count')} && "
            f"{f(f'in{k}_pattern')} >> in{k}_index & 1) begin",
            f"          {p}__valid <= 1; {p}__payload <= in{k}_memory[in{k}_base + in{k}_next];",
            f"        end else {p}__valid <= 0;",
            "      end",
            f"      in{k}_index <= in{k}_index + 1 == {f(f'in{k}_length')} ? 0 : in{k}_index + 1;",
        ]
    for k, port in enumerate(outputs):
        body += [f"      {port.name}__ready <= {f(f'out{k}_pattern')} >> out{k}_index & 1;",
                 f"      out{k}_index <= out{k}_index + 1 == {f(f'out{k}_length')} ? 0 : out{k}_index + 1;",
                 f"      out{k}_beats_scenario <= out{k}_beats_scenario + out{k}_fire;"]
    beats_now = " + ".join([f"in{k}_sent + in{k}_fire" for k in range(len(inputs))]
                           + [f"out{k}_beats_scenario + out{k}_fire" for k in range(queues)])
    finished = [f"in0_next == {f('in0_count')}", f"in1_sent == {f('in1_count')}", "!busy"]
    finished += [f"exp{k}_received + out{k}_fire >= {f(f'exp{k}_count')}" for k in range(queues)]
    finished.append(f"closed + close >= {f(f'exp{config_stream}_count')}")
    body += [f"      if (state == RUN && pre && cycle == {f('reset_after')}) begin",
             "        // reset mid-stream: the sources drop what they hold; the scenario restarts from reset",
             f"        before_reset <= before_reset + {beats_now};",
             "        resets <= resets + 1; pre <= 0;",
             f"        rst <= 1; reset_left <= {RESET_CYCLES - 1}; state <= RESET;"]
    body += [f"        out{k}_beats_scenario <= 0;" for k in range(queues)]
    body += [f"      end else if (state == RUN && !pre && {' && '.join(finished)}) begin",
             f"        state <= DRAIN; drain_left <= {DRAIN_CYCLES - 1};",
             "      end else if (state == DRAIN && drain_left != 0) begin",
             "        drain_left <= drain_left - 1;",
             f"      end else if (state == DRAIN || (!pre && cycle >= {f('timeout')})) begin",
             "        if (state == RUN) begin",
             "          if (!bad && details < DETAILED) begin",
             "            $fdisplay(result, \"timeout %0d %0d\", scenario, cycle);",
             "            details <= details + 1;",
             "          end",
             "          bad <= 1;",
             "        end",
             "        state <= LOAD;",
             "        scenario <= scenario + 1;",
             # A mismatch in this very cycle sets `wrong` (and `bad` only from the next cycle on).
             "        if (bad || wrong || state == RUN) mismatches <= mismatches + 1;"]
    for k in range(len(inputs)):
        body.append(f"        in{k}_beats <= in{k}_beats + in{k}_next; in{k}_base <= in{k}_base + {f(f'in{k}_count')};")
    for k in range(queues):
        body.append(f"        out{k}_beats <= out{k}_beats + out{k}_beats_scenario + out{k}_fire;"
                    f" out{k}_beats_scenario <= 0;")
    body += [f"        exp{k}_base <= exp{k}_base + {f(f'exp{k}_count')};" for k in range(len(streams))]
    body += ["      end"]
    lines += ["    RUN, DRAIN: begin", *body, "    end"]
    lines += done_state_and_end(len(inputs), queues)
    return "\n".join(lines)


def build(params, simulator, verilog=None, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS, tag=""):
    """Build (once) the sequencer's testbench; return its :class:`~trainforge.stream_bench.BenchBuild`.

    ``params`` are ``nt_sequencer``'s parameter overrides; ``verilog`` a broken sequencer's Verilog instead of the
    emitted one (for the tests), with ``tag`` keeping its build apart. The build's ``checked`` names the
    expectation streams.
    """
    params = BLOCKS[BLOCK].resolve(**params)
    emitted = emit_cached(BLOCK, **params)
    return build_folder(BLOCK, emitted, simulator, testbench_verilog(emitted, depth, scenarios),
                        input_ports(emitted), queue_ports(emitted), depth, scenarios, verilog=verilog, tag=tag,
                        header=header_layout(emitted.params["pes"]), checked=checked_streams(emitted.params["pes"]))
