"""A self-checking Verilog testbench of NeuroTrainer's bus (``nt_bus``), for the fast random regression.

The bus is more than streams: besides its stream ports it has the REQ input
(``merge_request``), the broadcast mask input and the grant output, so the
plain stream testbench (:mod:`trainforge.stream_bench`) cannot drive it. This
one plays the bus's scenario table (``verif/scenarios/nt_bus.py``) the way its
cocotb testbench (``verif/tb_nt_bus.py``) does, with Python out of the cycle
loop, and checks what that testbench checks:

- every delivered broadcast word against the table, per PE, in order;
- every merged word against the table, per sending PE (the ``source`` field),
  in order; bursts never interleaved (a PE's words until its END-MARK);
- the arbitration rules in every cycle: the grant one-hot or zero; no merge
  transfer while the common vault offers a word; a merge transfer only from
  the granted PE; a held grant kept until the END-MARK is accepted and
  dropped in the next cycle; a new grant only to the lowest-index REQ, only
  after a cycle without grant and without broadcast;
- in a scenario without backpressure (``exact`` in its header): the cycle of
  every output word (from the golden cycle model, written by Python) and
  every grant's PE and first cycle (the table's).

Scenario cycles: after the reset, one idle cycle; cycle 0 is the first in
which the PEs offer their merge words. The broadcast words are offered from
cycle ``broadcast_start`` on; in cycle ``c`` the mask is entry ``c`` of the
scenario's mask trace (the last one holds) and PE ``p``'s REQ is up when
``c >= request_cycle[p]`` and not all its words have been accepted before
``c``. Resets mid-stream, timeouts, the drain and the batch and result files
are those of :mod:`trainforge.stream_bench`, whose :func:`~trainforge.stream_bench.run`
reads the result. Detail lines added here: ``cycle <scenario> <stream> <beat>
<expected> <got>`` and ``rule <scenario> <cycle> <rule> <value>`` (the grant, or
the merged word for rules 6 and 7).

Batch files: ``sizes.hex`` (scenarios, then the entries of each ``in<k>.hex``
and ``exp<k>.hex``); ``scenarios.hex``; ``in0.hex`` the common
vault's words, ``in<1+p>.hex`` PE ``p``'s; ``in<1+pes>.hex`` the mask traces;
``exp<k>.hex`` the expectation streams of :func:`checked_streams`, each entry
``{cycle[31:0], payload}``.
"""
from .emit import emit_cached
from .hw.registry import BLOCKS
from .spec.neurotrainer import bus as bus_spec
from .stream_bench import (DEFAULT_DEPTH, DRAIN_CYCLES, PATTERN_BITS, RESET_CYCLES, HeaderLayout, StreamPort,
                           batch_loading, build_folder, done_state_and_end, expectation_reset_state,
                           input_stream_declarations, mismatch_statements, module_head, scenario_declarations,
                           start_and_load_state)

__all__ = ["BLOCK", "RULES", "DEFAULT_SCENARIOS", "checked_streams", "header_layout", "ports", "testbench_verilog",
           "build"]

#: The block this testbench drives.
BLOCK = "nt_bus"
#: The arbitration rules, by the number a ``rule`` detail line gives.
RULES = {
    1: "merge_grant is not one-hot or zero",
    2: "a merge transfer while the common vault offers a word",
    3: "a merge transfer from a PE without the grant",
    4: "a held grant not kept until its END-MARK, or not dropped in the cycle after it",
    5: "a new grant not to the lowest-index REQ, or given after a cycle with a grant or a broadcast",
    6: "a merged word inside another PE's burst",
    7: "a merged word from no PE (source out of range)",
}
#: Scenarios per batch (the table has 13 per pass).
DEFAULT_SCENARIOS = 1 << 10
#: Width of a grant expectation's payload: the PE's index.
GRANT_BITS = 8


def ports(pes, width):
    """``(inputs, outputs)``: the bus's stream ports as the Verilog names them (common vault first, then per PE)."""
    word = width + 1
    merged = bus_spec.merge_layout({"pes": pes, "width": width}).size
    inputs = [StreamPort("i_broadcast", "in", word)] + [StreamPort(f"i_merge__{pe}", "in", word) for pe in range(pes)]
    outputs = [StreamPort("o_merge", "out", merged)] + [StreamPort(f"o_broadcast__{pe}", "out", word)
                                                         for pe in range(pes)]
    return inputs, outputs


def checked_streams(pes):
    """Names of the expectation streams, in ``exp<k>.hex`` order: the words each PE receives, each PE sends, the grants."""
    return ([f"o_broadcast__{pe}" for pe in range(pes)] + [f"o_merge from {pe}" for pe in range(pes)] + ["grants"])


def header_layout(pes):
    """The fields of one scenario's header word (:class:`~trainforge.stream_bench.HeaderLayout`).

    Per input ``k`` (common vault, then each PE): ``in<k>_count``, ``in<k>_length``, ``in<k>_pattern`` (``valid``);
    per output ``k`` (``o_merge``, then each PE's broadcast): ``out<k>_length``, ``out<k>_pattern`` (``ready``);
    per expectation stream ``k``: ``exp<k>_count``; ``mask_count``, ``broadcast_start``, ``request<p>`` (the cycle
    PE ``p``'s REQ rises), ``exact`` (cycles and grants checked), ``reset_after``, ``timeout``.
    """
    fields = []
    for k in range(1 + pes):
        fields += [(f"in{k}_count", 32), (f"in{k}_length", 8), (f"in{k}_pattern", PATTERN_BITS)]
    for k in range(1 + pes):
        fields += [(f"out{k}_length", 8), (f"out{k}_pattern", PATTERN_BITS)]
    fields += [(f"exp{k}_count", 32) for k in range(len(checked_streams(pes)))]
    fields += [("mask_count", 32), ("broadcast_start", 16)]
    fields += [(f"request{pe}", 16) for pe in range(pes)]
    fields += [("exact", 1), ("reset_after", 32), ("timeout", 32)]
    return HeaderLayout((), (), fields)


def testbench_verilog(pes, width, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS):
    """The Verilog-2005 text of the bus's self-checking testbench (module ``trainforge_stream_bench``, input ``clk``)."""
    header = header_layout(pes)
    inputs, outputs = ports(pes, width)
    streams = checked_streams(pes)
    word = width + 1
    merge = outputs[0].width
    source_offset = width + 1
    end_bit = width
    grant_stream = 2 * pes

    def f(name):
        return f"header{header.slice(name)}"

    memories = len(inputs) + 1 + len(streams)
    lines = [
        *module_head("trainforge.bus_bench: the fast random regression's self-checking testbench of nt_bus.",
                     depth, scenarios, header.width, memories),
        *scenario_declarations(),
        "  // pre: checked for the arbitration rules only; cycle: 0 is the idle cycle after the reset, c + 1 is",
        "  // scenario cycle c",
        "  reg [31:0] now;               // the scenario cycle being observed (cycle - 1)",
        f"  reg [{pes - 1}:0] broadcast_mask, merge_request;",
        f"  wire [{pes - 1}:0] merge_grant;",
        f"  reg [{pes - 1}:0] mask_memory [0:DEPTH - 1];",
        "  reg [31:0] mask_base;",
        f"  reg [{pes - 1}:0] previous_grant, previous_request;",
        "  reg previous_broadcasting, previous_end_mark, observed;",
        f"  reg [{pes - 1}:0] merge_fires, grant, request;",
        "  reg end_mark, holding, new_grant, wrong;",
        "  reg [7:0] holder, source, granted;",
        "  integer pe;",
    ]
    for k, port in enumerate(inputs):
        lines += input_stream_declarations(k, port.name, word)
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
    for k, name in enumerate(streams):
        payload = GRANT_BITS if k == grant_stream else (merge if k >= pes else word)
        lines += [
            f"  // expectation stream {name}: {{cycle[31:0], payload}}",
            f"  reg [{31 + payload}:0] exp{k}_memory [0:DEPTH - 1];",
            f"  reg [{31 + payload}:0] exp{k}_word;",
            f"  reg [31:0] exp{k}_base, exp{k}_received;",
        ]
    connections = [".clk(clk)", ".rst(rst)", ".broadcast_mask(broadcast_mask)", ".merge_request(merge_request)",
                   ".merge_grant(merge_grant)"]
    for port in inputs + outputs:
        connections += [f".{port.name}__{s}({port.name}__{s})" for s in ("payload", "valid", "ready")]
    lines.append(f"  nt_bus dut ({', '.join(connections)});")

    files = [(f"in{k}.hex", f"in{k}_memory") for k in range(len(inputs))] + [(f"in{len(inputs)}.hex", "mask_memory")]
    files += [(f"exp{k}.hex", f"exp{k}_memory") for k in range(len(streams))]
    lines += ["  initial begin", *batch_loading(files)]
    for k, port in enumerate(inputs):
        lines.append(f"    {port.name}__valid = 0; {port.name}__payload = 0; in{k}_base = 0; in{k}_beats = 0;")
    for k, port in enumerate(outputs):
        lines.append(f"    {port.name}__ready = 0; out{k}_beats = 0; out{k}_beats_scenario = 0;")
    lines += [f"    exp{k}_base = 0;" for k in range(len(streams))]
    lines += ["    broadcast_mask = 0; merge_request = 0; mask_base = 0;", *start_and_load_state(header)]
    own_reset = ["      cycle <= 0; broadcast_mask <= 0; merge_request <= 0; observed <= 0; holding <= 0;"]
    lines += expectation_reset_state(own_reset, inputs, outputs, len(streams))

    mismatch = mismatch_statements

    def expect(k, payload, fire):
        """Check output beat ``payload`` against expectation stream ``k`` (payload always; cycle when exact)."""
        expected = f"exp{k}_memory[exp{k}_base + exp{k}_received]"
        width = GRANT_BITS if k == grant_stream else (merge if k >= pes else word)
        return [f"      if ({fire}) begin",
                f"        exp{k}_word = {expected};",
                f"        exp{k}_received <= exp{k}_received + 1;",
                f"        if (!pre && exp{k}_received >= {f(f'exp{k}_count')}) begin",
                *mismatch(f"\"extra %0d {k} %0d %h\", scenario, exp{k}_received, {payload}"),
                f"        end else if (!pre && {payload} !== exp{k}_word[{width - 1}:0]) begin",
                *mismatch(f"\"payload %0d {k} %0d %h %h\", scenario, exp{k}_received, exp{k}_word[{width - 1}:0], "
                          f"{payload}"),
                f"        end else if (!pre && {f('exact')} && now !== exp{k}_word[{31 + width}:{width}]) begin",
                *mismatch(f"\"cycle %0d {k} %0d %0d %0d\", scenario, exp{k}_received, exp{k}_word[{31 + width}:{width}],"
                          " now"),
                "        end",
                "      end"]

    def rule(number, condition):
        return [f"      if ({condition}) begin", *mismatch(f"\"rule %0d %0d {number} %h\", scenario, now, grant"),
                "      end"]

    body = ["      cycle <= cycle + 1;",
            "      wrong = 0;",
            "      now = cycle - 1;",
            "      grant = merge_grant;",
            "      request = merge_request;"]
    for k, port in enumerate(inputs):
        body += [f"      in{k}_fire = {port.name}__valid && {port.name}__ready;",
                 f"      in{k}_next = in{k}_sent + in{k}_fire;"]
    for k, port in enumerate(outputs):
        body.append(f"      out{k}_fire = {port.name}__valid && {port.name}__ready;")
    body += ["      merge_fires = {" + ", ".join(f"in{1 + pe}_fire" for pe in reversed(range(pes))) + "};",
             "      end_mark = 0;"]
    for pe in range(pes):
        body.append(f"      if (in{1 + pe}_fire && i_merge__{pe}__payload[{end_bit}]) end_mark = 1;")
    # The rules, in the observed cycle (cycle 0 is the idle cycle: nothing to observe yet).
    body += ["      if (cycle != 0) begin"]
    body += ["  " + line for line in rule(1, "(grant & (grant - 1)) != 0")]
    body += ["  " + line for line in rule(2, "i_broadcast__valid && merge_fires != 0")]
    body += ["  " + line for line in rule(3, "(merge_fires & ~grant) != 0")]
    body += ["  " + line for line in rule(
        4, "observed && previous_grant != 0 && grant != (previous_end_mark ? 0 : previous_grant)")]
    body += ["  " + line for line in rule(
        5, "observed && previous_grant == 0 && grant != (previous_request != 0 && !previous_broadcasting ? "
           "previous_request & -previous_request : 0)")]
    body += ["        observed <= 1;",
             "        previous_grant <= grant;",
             "        previous_request <= request;",
             "        previous_broadcasting <= i_broadcast__valid;",
             "        previous_end_mark <= merge_fires != 0 && end_mark;",
             "      end"]
    # Output words: the broadcast words per PE, the merged words per source, and the grants.
    for pe in range(pes):
        body += expect(pe, f"o_broadcast__{pe}__payload", f"out{1 + pe}_fire")
    body += ["      source = o_merge__payload >> " + str(source_offset) + ";",
             "      if (out0_fire) begin",
             f"        if (source >= {pes}) begin",
             *("  " + line for line in mismatch(f"\"rule %0d %0d 7 %h\", scenario, now, o_merge__payload")),
             "        end",
             "        if (holding && source != holder) begin",
             *("  " + line for line in mismatch(f"\"rule %0d %0d 6 %h\", scenario, now, o_merge__payload")),
             "        end",
             f"        holding <= !o_merge__payload[{end_bit}]; holder <= source;",
             "      end"]
    for pe in range(pes):
        body += expect(pes + pe, "o_merge__payload", f"out0_fire && source == {pe}")
    body += ["      new_grant = cycle != 0 && grant != 0 && !(observed && previous_grant != 0);",
             "      granted = 0;",
             f"      for (pe = 0; pe < {pes}; pe = pe + 1) if (grant >> pe & 1) granted = pe;"]
    body += expect(grant_stream, "granted", f"{f('exact')} && new_grant")
    # Drive cycle `cycle` (the scenario cycle after the observed one).
    for k, port in enumerate(inputs):
        p = port.name
        start = f" && cycle >= {f('broadcast_start')}" if k == 0 else ""
        body += [
            f"      in{k}_sent <= in{k}_next;",
            f"      if (!{p}__valid || in{k}_fire) begin",
            f"        if (state == RUN{start} && in{k}_next < {f(f'in{k}_count')} && "
            f"{f(f'in{k}_pattern')} >> in{k}_index & 1) begin",
            f"          {p}__valid <= 1; {p}__payload <= in{k}_memory[in{k}_base + in{k}_next];",
            f"        end else {p}__valid <= 0;",
            "      end",
            f"      in{k}_index <= in{k}_index + 1 == {f(f'in{k}_length')} ? 0 : in{k}_index + 1;",
        ]
    for k, port in enumerate(outputs):
        body += [f"      {port.name}__ready <= {f(f'out{k}_pattern')} >> out{k}_index & 1;",
                 f"      out{k}_index <= out{k}_index + 1 == {f(f'out{k}_length')} ? 0 : out{k}_index + 1;"]
    body += [f"      broadcast_mask <= mask_memory[mask_base + (cycle < {f('mask_count')} ? cycle : "
             f"{f('mask_count')} - 1)];"]
    request = " | ".join(f"((state == RUN && cycle >= {f(f'request{pe}')} && in{1 + pe}_next < {f(f'in{1 + pe}_count')})"
                         f" << {pe})" for pe in range(pes))
    body.append(f"      merge_request <= {request};")
    beats_now = " + ".join([f"in{k}_sent + in{k}_fire" for k in range(len(inputs))]
                           + [f"out{k}_beats_scenario + out{k}_fire" for k in range(len(outputs))])
    sent_all = " && ".join(f"in{k}_next == {f(f'in{k}_count')}" for k in range(len(inputs)))
    beats = [f"out{1 + k}_fire" for k in range(pes)] + [f"(out0_fire && source == {k})" for k in range(pes)]
    received = [f"(exp{k}_received + {beat} >= {f(f'exp{k}_count')})" for k, beat in enumerate(beats)]
    received.append(f"(!{f('exact')} || exp{grant_stream}_received + new_grant >= {f(f'exp{grant_stream}_count')})")
    received_all = " && ".join(received)
    body += [f"      out{k}_beats_scenario <= out{k}_beats_scenario + out{k}_fire;" for k in range(len(outputs))]
    body += [f"      if (state == RUN && pre && cycle == {f('reset_after')}) begin",
             "        // reset mid-stream: the sources drop what they hold; the scenario restarts from reset",
             f"        before_reset <= before_reset + {beats_now};",
             "        resets <= resets + 1; pre <= 0;",
             f"        rst <= 1; reset_left <= {RESET_CYCLES - 1}; state <= RESET;"]
    body += [f"        out{k}_beats_scenario <= 0;" for k in range(len(outputs))]
    body += [f"      end else if (state == RUN && !pre && {sent_all} && {received_all}) begin",
             f"        state <= DRAIN; drain_left <= {DRAIN_CYCLES - 1};",
             "        merge_request <= 0;",
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
             "        merge_request <= 0;"]
    # A rule broken or an extra beat in this very cycle sets `wrong` (and `bad` only from the next cycle on).
    body += ["        if (bad || wrong || state == RUN) mismatches <= mismatches + 1;"]
    for k in range(len(inputs)):
        body.append(f"        in{k}_beats <= in{k}_beats + in{k}_next; in{k}_base <= in{k}_base + {f(f'in{k}_count')};")
    for k in range(len(outputs)):
        body.append(f"        out{k}_beats <= out{k}_beats + out{k}_beats_scenario + out{k}_fire;"
                    f" out{k}_beats_scenario <= 0;")
    body += [f"        exp{k}_base <= exp{k}_base + {f(f'exp{k}_count')};" for k in range(len(streams))]
    body += [f"        mask_base <= mask_base + {f('mask_count')};",
             "      end"]
    lines += ["    RUN, DRAIN: begin", *body, "    end"]
    lines += done_state_and_end(len(inputs), len(outputs))
    return "\n".join(lines)


def build(params, simulator, verilog=None, depth=DEFAULT_DEPTH, scenarios=DEFAULT_SCENARIOS, tag=""):
    """Build (once) the bus's testbench; return its :class:`~trainforge.stream_bench.BenchBuild`.

    ``params`` are ``nt_bus``'s parameter overrides; ``verilog`` a broken bus's Verilog instead of the emitted one
    (for the tests), with ``tag`` keeping its build apart. The build's ``checked`` names the expectation streams.
    """
    params = BLOCKS[BLOCK].resolve(**params)
    emitted = emit_cached(BLOCK, **params)
    pes, width = emitted.params["pes"], emitted.params["width"]
    inputs, outputs = ports(pes, width)
    return build_folder(BLOCK, emitted, simulator, testbench_verilog(pes, width, depth, scenarios), inputs, outputs,
                        depth, scenarios, verilog=verilog, tag=tag, header=header_layout(pes),
                        checked=checked_streams(pes))
