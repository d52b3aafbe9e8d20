"""The fast random regression: a block's scenario table played by a self-checking Verilog testbench.

Same meaning as the cocotb regression (:mod:`regression`), with Python out of
the per-cycle loop. Python plays passes of the block's table
(``verif/scenarios/<block>.py``), each with a fresh scenario seed
(:func:`regression_common.scenario_seed`): it packs every scenario's stimulus
and the table's expected payloads (the table's reference, independent of the
golden model) through the ports' own ``lib.data`` layouts, picks the
resets mid-stream (:func:`regression_common.reset_after`, the same draws as
the cocotb path) and writes batches of hex files. The testbench
(:mod:`trainforge.stream_bench`, built once per block and simulator) plays
them with each scenario's own ``valid`` and ``ready`` patterns and checks
every output beat's payload and order; the output cycles are not checked
(the cocotb ``scenario_table`` tests do that).

Transaction, reset mid-stream and mismatch mean what they mean in
:mod:`regression`; each mismatch is recorded with its scenario seed, and
``TRAINFORGE_REGRESS_REPLAY=<scenario seed>`` replays that one pass of the
table on this path (and on the cocotb one). A run is one *shard*: several
shards of one block, each with its own seed, run as separate processes and
are summed in the table (:mod:`trainforge.regression`).
"""
import importlib
import pathlib
import shutil
import time

from amaranth.hdl import Shape, ShapeCastable
from amaranth.lib import data, enum

from regression_common import (DETAILED_MISMATCHES, MAX_MISMATCHES, add_to_batch, handshake_fields, reset_after,
                               scenario_seed, timeout_cycles)
from scenario import payload_shapes
from trainforge import bus_bench, sequencer_bench, stream_bench, vector_bench
from trainforge.errors import ParameterError
from trainforge.hw.registry import BLOCKS
import fast_bus
import fast_cp_pe
import fast_sequencer

__all__ = ["FAST_BLOCKS", "VECTOR_BLOCKS", "SIMULATOR_PARAMS", "SIMULATOR_FORMS", "packer", "plan_batches", "run_shard"]

#: Blocks whose regression can run on the fast path: their tables' stimulus goes in on independent streams and
#: their checks are payloads in order (``nt_pe``'s program acceptance cycles, which its cocotb runner also checks,
#: stay with the cocotb tests); and ``nt_bus``, on its own testbench (:mod:`trainforge.bus_bench`: the arbitration
#: every cycle, and the golden model's output cycles without backpressure); ``nt_sequencer`` on sequencer_bench;
#: and ``cp_pe``, which has no streams, its scenarios flattened into per-cycle vectors (:mod:`fast_cp_pe`,
#: :mod:`trainforge.vector_bench`).
FAST_BLOCKS = ("stream_stage", "fp_mul", "fp32_add", "nt_mac", "nt_lut", "dense_pe", "td_transposer", "td_pe",
               "td_tile", "nt_comparator", "cp_reciprocal", "nt_vault", "td_scheduler", "nt_pmag", "cp_core", "cp_ring",
               "nt_pe", "nt_bus", "nt_sequencer", "cp_pe")
#: The fast blocks played as per-cycle vectors (:mod:`trainforge.vector_bench`), not through stream ports, and the
#: module that flattens each one's table (``CHECKED``, the outputs compared, and ``plan_batches``).
VECTOR_PLANNERS = {fast_cp_pe.BLOCK: fast_cp_pe}
VECTOR_BLOCKS = tuple(VECTOR_PLANNERS)
#: Parameter overrides of a block's fast regression on one simulator (default: the block's defaults). None today:
#: every block runs its defaults on both simulators.
SIMULATOR_PARAMS = {}
#: The form of a block's Verilog that a simulator plays (``trainforge.stream_bench.FORMS``; default ``"emitted"``).
#: ``td_tile`` on Icarus plays the same design after Yosys's ``proc; flatten; opt``: Icarus's own evaluation of the
#: emitted 4 x 4 tile ran 99 cycles per second (230 transactions per CPU-second), which made 10^6 transactions
#: 72 CPU-minutes, more than the whole regression's budget; see the README, "Random regression".
SIMULATOR_FORMS = {("td_tile", "icarus"): "yosys-opt"}


def packer(shape):
    """A function ``item -> int`` packing a table item as the payload bits of ``shape`` (what :func:`scenario.to_bits` gives).

    Compiled once per shape from its ``lib.data`` layout (field offsets and widths), so that packing costs
    no Amaranth constant per item.
    """
    width = Shape.cast(shape).width
    mask = (1 << width) - 1
    if isinstance(shape, data.StructLayout):
        fields = [(name, member.offset, packer(member.shape)) for name, member in shape]

        def pack_struct(item):
            value = 0
            for name, offset, pack in fields:
                value |= pack(item[name]) << offset
            return value
        return pack_struct
    if isinstance(shape, data.ArrayLayout):
        element, step, length = packer(shape.elem_shape), Shape.cast(shape.elem_shape).width, shape.length

        def pack_array(item):
            if len(item) != length:
                raise ValueError(f"an array of {length} elements was expected, got {len(item)}")
            value = 0
            for index, element_item in enumerate(item):
                value |= element(element_item) << (index * step)
            return value
        return pack_array
    if isinstance(shape, enum.EnumType):
        return lambda item: int(item.value if isinstance(item, shape) else item) & mask
    if isinstance(shape, ShapeCastable) or isinstance(shape, data.Layout):
        from scenario import to_bits
        return lambda item: to_bits(shape, item)
    return lambda item: int(item) & mask


class _Packers:
    """The ports of a block in the testbench's order, and a packer per port."""

    def __init__(self, block_name, params, bench):
        component = BLOCKS[block_name].build(**params)
        component._MustUse__silence = True  # built for its signature only, never elaborated
        shapes = payload_shapes(component)
        self.inputs = [port.name for port in bench.inputs]
        self.outputs = [port.name for port in bench.outputs]
        self.pack = {port: packer(shapes[port][1]) for port in self.inputs + self.outputs}


def _passes(module, params, seed, replay):
    """``(scenario seed, pass, index, scenario)`` of every pass of the table, endless (one pass with ``replay``)."""
    iteration = 0
    while True:
        pass_seed = replay if replay is not None else scenario_seed(seed, iteration)
        for index, scenario in enumerate(module.scenarios(params, pass_seed)):
            yield pass_seed, iteration, index, scenario
        if replay is not None:
            return
        iteration += 1


def plan_batches(block_name, params, bench, seed, target, replay=None, alter_expected=None):
    """Batches of table scenarios until ``target`` transactions are planned; yields ``(plan, headers, stimulus, expected)``.

    ``plan`` lists, per scenario of the batch, its scenario seed, pass, index in the table and name; the
    other three are what :func:`trainforge.stream_bench.write_batch` takes. With ``replay`` (a scenario
    seed), the one pass of the table of that seed. ``alter_expected(port, payloads)``, for the tests only,
    returns a scenario's expected payloads of one output port changed (a deliberately wrong expectation).
    """
    module = importlib.import_module(f"scenarios.{block_name}")
    packers = _Packers(block_name, params, bench)
    header = bench.header
    planned = 0

    def empty():
        return [], [], [[] for _ in packers.inputs], [[] for _ in packers.outputs]

    plan, headers, stimulus, expected = empty()
    for pass_seed, iteration, index, scenario in _passes(module, params, seed, replay):
        if replay is None and planned >= target:
            break
        ins = [[packers.pack[port](item) for item in scenario.stimulus.get(port, ())] for port in packers.inputs]
        outs = [[packers.pack[port](item) for item in scenario.expected.get(port, ())] for port in packers.outputs]
        if alter_expected is not None:
            outs = [alter_expected(port, payloads) for port, payloads in zip(packers.outputs, outs)]
        for port, payloads in zip(packers.inputs + packers.outputs, ins + outs):
            if len(payloads) > bench.depth:  # no batch can hold it: name the scenario as it is planned
                raise ParameterError(f"{block_name} scenario {scenario.name!r} (scenario seed {pass_seed}) has "
                                     f"{len(payloads)} payloads on {port}; allowed: at most the fast testbench's "
                                     f"{bench.depth} per port")
        if (len(headers) == bench.scenarios or any(len(a) + len(b) > bench.depth for a, b in zip(stimulus, ins))
                or any(len(a) + len(b) > bench.depth for a, b in zip(expected, outs))):
            yield plan, headers, stimulus, expected
            plan, headers, stimulus, expected = empty()
        fields = {"reset_after": reset_after(scenario, pass_seed, index), "timeout": timeout_cycles(scenario)}
        fields.update(handshake_fields(scenario, packers.inputs, ins, packers.outputs, outs))
        headers.append(header.pack(**fields))
        add_to_batch(plan, stimulus, expected, {"scenario_seed": pass_seed, "pass": iteration, "index": index,
                                                "scenario": scenario.name, "reset_after": fields["reset_after"]},
                     ins, outs)
        planned += sum(map(len, ins)) + sum(map(len, outs))
    if headers:
        yield plan, headers, stimulus, expected


def _message(bench, entry, detail):
    names = bench.checked or tuple(port.name for port in bench.outputs)
    if detail["kind"] == "payload":
        return (f"{entry['scenario']}: {names[detail['port']]} transaction {detail['beat']} expected "
                f"0x{detail['expected']}, got 0x{detail['got']}")
    if detail["kind"] == "extra":
        return f"{entry['scenario']}: {names[detail['port']]} extra transaction {detail['beat']}: 0x{detail['got']}"
    if detail["kind"] == "cycle":
        source = "the table" if names[detail["port"]] == "grants" else "the golden model"
        return (f"{entry['scenario']}: {names[detail['port']]} transaction {detail['beat']} expected at cycle "
                f"{detail['expected']} ({source}), got {detail['got']}")
    if detail["kind"] == "rule":
        rules = sequencer_bench.RULES if bench.block == sequencer_bench.BLOCK else bus_bench.RULES
        return (f"{entry['scenario']}: cycle {detail['cycle']}: {rules[detail['rule']]} "
                f"(0x{detail['value']})")
    return f"{entry['scenario']}: timed out after {detail['cycles']} cycles"


def run_shard(block_name, simulator, seed, target, params=None, replay=None, folder=None, bench=None,
              alter_expected=None):
    """One shard of the fast regression of a block on one simulator; return its record (the JSON of the table).

    Parameters
    ----------
    block_name : str
        A block of :data:`FAST_BLOCKS` (any block whose streams the table harness plays).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    seed : int
        The shard's seed; pass ``i`` of the table has scenario seed ``scenario_seed(seed, i)``.
    target : int
        Checked transactions to reach (the last batch stops at the scenario that reaches it).
    params : dict, optional
        Parameter overrides (default: :data:`SIMULATOR_PARAMS` of the block and simulator, else none).
    replay : int, optional
        A scenario seed: that one pass of the table only.
    folder : path, optional
        Where the batches are written (default: the build's ``runs/<seed>`` folder); emptied first.
    bench : trainforge.stream_bench.BenchBuild, optional
        A build to use (a deliberately broken block's, for the tests); default: built from the block.
    alter_expected : callable, optional
        For the tests: changes the expected payloads (:func:`plan_batches`).
    """
    overrides = dict(SIMULATOR_PARAMS.get((block_name, simulator), {}) if params is None else params)
    params = BLOCKS[block_name].resolve(**overrides)
    if block_name == bus_bench.BLOCK:
        bench = bench or bus_bench.build(params, simulator)
    elif block_name == sequencer_bench.BLOCK:
        bench = bench or sequencer_bench.build(params, simulator)
    elif block_name in VECTOR_BLOCKS:
        bench = bench or vector_bench.build(block_name, params, simulator, VECTOR_PLANNERS[block_name].CHECKED)
    else:
        bench = bench or stream_bench.build(block_name, params, simulator,
                                            form=SIMULATOR_FORMS.get((block_name, simulator), "emitted"))
    folder = pathlib.Path(folder or bench.folder / "runs" / str(seed))
    shutil.rmtree(folder, ignore_errors=True)
    record = {
        "block": block_name, "path": "fast", "simulator": simulator, "params": params, "param_overrides": overrides,
        "form": bench.form,
        "cocotb_seed": seed,
        "shard_seed": seed, "target": target, "replay": replay, "transactions": 0,
        "input_beats": {port.name: 0 for port in bench.inputs}, "output_beats": {port.name: 0 for port in bench.outputs},
        "passes": 0, "scenarios": 0, "resets_mid_stream": 0, "beats_before_reset": 0, "mismatches": 0,
        "mismatch_details": [], "cycles": 0, "wall_seconds": 0.0, "generate_seconds": 0.0, "simulate_seconds": 0.0,
        "cpu_seconds": 0.0,
        "build_seconds": bench.build_seconds, "batches": 0,
    }
    began = time.monotonic()
    if block_name == bus_bench.BLOCK:
        batches = fast_bus.plan_batches(params, bench, seed, target, replay, alter_expected, passes=_passes,
                                        packer=packer)
    elif block_name == sequencer_bench.BLOCK:
        batches = fast_sequencer.plan_batches(params, bench, seed, target, replay, alter_expected, passes=_passes,
                                              packer=packer)
    elif block_name in VECTOR_BLOCKS:
        planned = VECTOR_PLANNERS[block_name].plan_batches(params, bench, seed, target, replay, alter_expected,
                                                           passes=_passes,
                                                           table=importlib.import_module(f"scenarios.{block_name}"))
        batches = ((plan, None, vectors, expected) for plan, vectors, expected in planned)
    else:
        batches = plan_batches(block_name, params, bench, seed, target, replay, alter_expected)
    while record["mismatches"] < MAX_MISMATCHES:
        generating, generating_cpu = time.monotonic(), time.process_time()
        batch = next(batches, None)
        if batch is None:
            break
        plan, headers, stimulus, expected = batch
        if headers is None:  # the vector testbench: stimulus is the vectors
            vector_bench.write_batch(folder, bench, stimulus, expected)
        else:
            stream_bench.write_batch(folder, bench, headers, stimulus, expected)
        record["generate_seconds"] += time.monotonic() - generating
        record["cpu_seconds"] += time.process_time() - generating_cpu
        result = stream_bench.run(bench, folder)
        record["simulate_seconds"] += result["wall_seconds"]
        record["cpu_seconds"] += result["cpu_seconds"]
        record["batches"] += 1
        for k, port in enumerate(bench.inputs):
            record["input_beats"][port.name] += result["input_beats"][k]
        for k, port in enumerate(bench.outputs):
            record["output_beats"][port.name] += result["output_beats"][k]
        record["scenarios"] += result["scenarios"]
        record["passes"] = plan[-1]["pass"] + 1
        record["resets_mid_stream"] += result["resets"]
        record["beats_before_reset"] += result["before_reset"]
        record["cycles"] += result["cycles"]
        record["mismatches"] += result["mismatches"]
        for detail in result["details"]:
            if len(record["mismatch_details"]) < DETAILED_MISMATCHES:
                entry = plan[detail["scenario"]]
                record["mismatch_details"].append({**entry, "message": _message(bench, entry, detail)})
    record["transactions"] = sum(record["input_beats"].values()) + sum(record["output_beats"].values())
    record["wall_seconds"] = round(time.monotonic() - began, 3)
    record["generate_seconds"] = round(record["generate_seconds"], 3)
    record["simulate_seconds"] = round(record["simulate_seconds"], 3)
    record["cpu_seconds"] = round(record["cpu_seconds"], 3)
    return record
