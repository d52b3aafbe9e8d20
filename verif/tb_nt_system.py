"""Integration test of ``nt_system``: its scenario table (``verif/scenarios/nt_system.py``), SR state, reset.

For every layer of a scenario the host writes the vault images of the layer's inputs (the
common vault and each PE's vault), sets the system's ``config``, and queues the compiled
programs: per vault its read and write PMAG programs, per PE its pass words. After the last
write the host reads every vault back. Every vault word and the output tensor read from the
vaults must equal the table's (numpy for integer layers, the reference executor for the vault
images and SR layers). The SR-LO state carried from layer to layer is checked against the
golden model (``golden/neurotrainer/integration.py``).
"""
import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.sim.neurotrainer import executor
from trainforge.sim.neurotrainer.ibuffer_loads import sequencer_loads, system_program
from trainforge.sim.neurotrainer.integration_layers import compile_for_system, host_images, layer_config, \
    run_layers, vault_programs
from trainforge.sim.neurotrainer.layer_chain import run_program
from trainforge.sim.neurotrainer.cnn_training import cnn_host_tensors, cnn_sgd_step
from trainforge.sim.neurotrainer.sequenced_training import sequenced_sgd_step, sgd_host_tensors
from trainforge.sim.neurotrainer.step_program import host_image_writes, ibuffer_runs
from trainforge.sim.neurotrainer.system_training import SGD_LAYERS, layer_inputs, sgd_layers, sgd_step, update
from trainforge.sim.neurotrainer.program import pmag_rtl_payload
from trainforge.sim.neurotrainer.program_time import ModuleTiming, layer_time
from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path, pack, stream_ports

from trainforge.errors import ProgramError
from trainforge.golden.neurotrainer.vault import nt_vault as golden_vault

import scenarios.nt_system as table
from regression import regression_test
from scenario import Transactions, check_transactions, rng_for
from tbutil import start


#: The input streams that only the sequenced tests drive (a StreamSource of their own): the iBuffer load and the
#: program start. Every other test leaves them idle.
IDLE_INPUTS = ("i_ibuffer", "i_start")


async def start_system(dut):
    """:func:`tbutil.start` with :data:`IDLE_INPUTS`' valid driven to 0 from before the reset: a test that does not
    drive them left them undriven (``x`` on Icarus) through every cycle. A test that drives them takes them over with
    its :class:`StreamSource` (which drives valid 0 until it offers a word)."""
    for name in IDLE_INPUTS:
        getattr(dut, f"{name}__valid").value = 0
    return await start(dut)


class Harness:
    def __init__(self, bench):
        dut, cycle, rng = bench.dut, bench.cycle, bench.rng
        self.bench = bench
        self.component = component = bench.component
        vaults = component.pes + 1
        self.host = [StreamSource(dut, f"i_host__{v}", cycle, rng) for v in range(vaults)]
        self.host_data = [StreamSink(dut, f"o_host_data__{v}", cycle, rng) for v in range(vaults)]
        self.read_program = [StreamSource(dut, f"i_read_program__{v}", cycle, rng) for v in range(vaults)]
        self.write_program = [StreamSource(dut, f"i_write_program__{v}", cycle, rng) for v in range(vaults)]
        self.pe_program = [StreamSource(dut, f"i_pe_program__{pe}", cycle, rng) for pe in range(component.pes)]
        self.names = {}
        for kind, sources in (("i_host", self.host), ("i_read_program", self.read_program),
                              ("i_write_program", self.write_program), ("i_pe_program", self.pe_program),
                              ("o_host_data", self.host_data)):
            self.names.update({id(port): f"{kind}__{index}" for index, port in enumerate(sources)})
        dut.config.value = 0

    def sources(self):
        return (*self.host, *self.read_program, *self.write_program, *self.pe_program)

    def pending(self):
        """Names of the sources with words still queued (for timeout messages)."""
        return ", ".join(f"{self.names[id(source)]} ({len(source.queue) + (source._offered is not None)})"
                         for source in self.sources() if not source.idle)

    def handshakes(self, valid, ready):
        """Per-port valid and ready patterns (always valid / ready where none is named)."""
        for source in self.sources():
            source.follow(valid.get(self.names[id(source)], (1,)))
        for sink in self.host_data:
            sink.follow(ready.get(self.names[id(sink)], (1,)))

    def drop(self):
        for source in self.sources():
            source.drop()


async def host_write(harness, images, label):
    layout = harness.component.host_layout
    for vault, words in images.items():
        harness.host[vault].send([pack(layout, {"address": address, "write": 1, "data": int(word) & 0xFFFFFFFF})
                                  for address, word in enumerate(words)])
    longest = max(len(words) for words in images.values())
    await harness.bench.wait_until(lambda: all(source.idle for source in harness.host), 20 * longest + 100,
                                   f"host writes ({label})")


async def host_read(harness, sizes, label):
    layout = harness.component.host_layout
    before = {vault: len(harness.host_data[vault].received) for vault in sizes}
    for vault, count in sizes.items():
        harness.host[vault].send([pack(layout, {"address": address, "write": 0, "data": 0})
                                  for address in range(count)])
    await harness.bench.wait_until(
        lambda: all(len(harness.host_data[vault].received) >= before[vault] + count for vault, count in sizes.items()),
        30 * max(sizes.values()) + 200, f"host read-back ({label})")
    return {vault: np.array([payload for _, payload in harness.host_data[vault].received[before[vault]:
                                                                                      before[vault] + count]],
                            dtype=np.int64) for vault, count in sizes.items()}


def queue_layer(harness, layer, config=None):
    """Set ``config`` (``layer_config``'s unless given) and queue every PMAG program and PE pass word of a compiled
    layer."""
    component = harness.component
    harness.bench.dut.config.value = pack(component.config_layout, layer_config(layer) if config is None else config)
    reads, writes = vault_programs(layer, component.pes)
    layout = component.pmag_program_layout
    for vault in reads:
        harness.read_program[vault].send([pmag_rtl_payload(program, layout) for program in reads[vault]])
        harness.write_program[vault].send([pmag_rtl_payload(program, layout) for program in writes[vault]])
    for job in layer.pe_jobs:
        harness.pe_program[job.pe].send([int(word) for word in job.passes])


def input_images(layer, inputs):
    """The vault images of a layer's inputs (host data preparation done), by system vault number (0 = common,
    1 + i = PE i)."""
    return {vault + 1: words for vault, words in host_images(layer, inputs).items()}


async def run_layer(harness, layer, inputs, label, config=None):
    """Run one compiled layer from its input images (with ``config`` when given); return every vault's words after
    it, by system vault number."""
    bench = harness.bench
    images = input_images(layer, inputs)
    for vault, words in images.items():
        limit = bench.params["vault_depth"] if vault == 0 else bench.params["pe_vault_depth"]
        assert words.size <= limit, f"{label}: vault {vault} needs {words.size} words {bench.where()}"
    await host_write(harness, images, label)
    queue_layer(harness, layer, config)
    work = sum(len(job.passes) * 300 for job in layer.pe_jobs) + 20 * sum(layer.vault_words.values()) + 2000
    for _ in range(work):
        if all(source.idle for source in harness.sources()):
            break
        await RisingEdge(bench.dut.clk)
    assert all(source.idle for source in harness.sources()), \
        f"{label} {layer.dims}: timed out after {work} cycles; not taken yet: {harness.pending()} {bench.where()}"
    for _ in range(2):
        await RisingEdge(bench.dut.clk)
    await bench.wait_until(lambda: bench.dut.idle.value == 1, work, f"the last write ({label})")
    return await host_read(harness, {vault: words.size for vault, words in images.items()}, label)


async def play(harness, scenario):
    """Run a table scenario's layers in order and check every layer's output and vault words."""
    bench = harness.bench
    harness.handshakes(scenario.valid, scenario.ready)
    items = {"output": []}
    for layer in scenario.stimulus["layers"]:
        compiled = table.compile_layer(bench.params, layer)
        label = f"{scenario.name}: {layer['kind']} {layer['dims']}"
        final = await run_layer(harness, compiled, layer["inputs"], label, table.system_config(layer, compiled))
        output = executor.unload(compiled, {vault - 1: words for vault, words in final.items()})
        items["output"].append(table.output_item(layer, output))
        for vault, words in final.items():
            items.setdefault(f"vault {vault}", []).append((words & 0xFFFFFFFF).tolist())
        bench.dut._log.info("%s on %d PEs x %d lanes (%d merged result blocks per PE) done", label,
                            bench.component.pes, bench.component.lanes, table.result_blocks(compiled))
    check_transactions(scenario, Transactions(items), bench.where())


@cocotb.test()
async def power_on_vaults_read_zero(dut):
    """Before any write, every word of every vault (the common vault and each PE's) read by the host is what the
    golden vault model (``golden/neurotrainer/vault.py``) returns for a read of a word never written: its initial
    contents, zeros.

    It must be the module's first test: the vaults keep what later tests write, even across resets.
    """
    bench = await start_system(dut)
    harness = Harness(bench)
    depths = {0: bench.params["vault_depth"], **{1 + pe: bench.params["pe_vault_depth"]
                                                   for pe in range(bench.component.pes)}}
    read = await host_read(harness, depths, "power-on vault contents")
    for vault, depth in depths.items():
        addresses = np.arange(depth)
        expected = golden_vault(addresses, np.zeros(depth, dtype=bool), np.zeros(depth), depth=depth)["data"]
        wrong = np.flatnonzero(read[vault] != expected)
        assert not len(wrong), (f"vault {vault}: power-on word {wrong[0]} reads {read[vault][wrong[0]]:#x}, expected "
                                f"{int(expected[wrong[0]]):#x} ({len(wrong)} words differ) {bench.where()}")


@cocotb.test()
async def power_on_pe_buffers_read_zero(dut):
    """Before any write, the PEs' BUF Input 1 words and BUF Input 2 rows read 0: a pass per PE reads a half of
    BUF Input 1 after a block of one word, the next a half of BUF Input 2 after a block of one row
    (``scenarios.nt_system.power_on_scenario``; expected: the golden system model's).

    It must run before any other test that runs a layer: the buffers keep what later tests write, even across
    resets.
    """
    bench = await start_system(dut)
    harness = Harness(bench)
    scenario = table.power_on_scenario(bench.params, bench.seed)
    if scenario is None:
        dut._log.info("the power-on layers do not fit these parameters: not run")
        return
    await play(harness, scenario)


def _merged(scenario):
    """A scenario with merged result blocks (``merged_scenarios`` plays them, ``scenario_table`` leaves them)."""
    return "merged" in scenario.name


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/nt_system.py`` but the hand-written programs and those with merged result
    blocks (``handwritten_programs`` and ``merged_scenarios`` play them), each from reset (with
    ``NT_SYSTEM_SCENARIO`` set: only those whose name contains it, to iterate on one)."""
    bench = await start_system(dut)
    harness = Harness(bench)
    only = os.environ.get("NT_SYSTEM_SCENARIO", "")
    for index, scenario in enumerate(scenario for scenario in table.scenarios(bench.params, bench.seed)
                                     if only in scenario.name and scenario.name != table.HANDWRITTEN
                                     and not _merged(scenario)):
        if index:
            await bench.reset()
        await play(harness, scenario)


@cocotb.test()
async def merged_scenarios(dut):
    """The scenarios with merged result blocks only (``verif/test_nt_merge_order.py`` runs them on 3 PEs)."""
    bench = await start_system(dut)
    harness = Harness(bench)
    for index, scenario in enumerate(scenario for scenario in table.scenarios(bench.params, bench.seed)
                                     if _merged(scenario)):
        if index:
            await bench.reset()
        await play(harness, scenario)


@cocotb.test()
async def handwritten_programs(dut):
    """The table's scenario of hand-written PMAG programs (``scenarios.nt_system.handwritten_programs``,
    ``select_programs`` and ``common_vault_programs``; ``scenario_table`` leaves it to this test, which the mutation
    subset runs)."""
    bench = await start_system(dut)
    harness = Harness(bench)
    chosen = [scenario for scenario in table.scenarios(bench.params, bench.seed) if scenario.name == table.HANDWRITTEN]
    if not chosen:
        dut._log.info("the hand-written programs do not fit these parameters: not run")
    for scenario in chosen:
        await play(harness, scenario)


@cocotb.test()
async def end_mark_early(dut):
    """A layer whose ``config`` sends the END-MARK one row before its write programs end
    (``scenarios.nt_system.end_mark_early_scenario``): the vault controllers write the END-MARK word where a data
    request meets it and drop the result words the END requests meet (expected: the reference executor's images with
    that join applied)."""
    bench = await start_system(dut)
    scenario = table.end_mark_early_scenario(bench.params, bench.seed)
    if scenario is None:
        dut._log.info("the early END-MARK layer does not fit these parameters: not run")
        return
    await play(Harness(bench), scenario)


@cocotb.test()
async def stochastic_rounding_state_carried(dut):
    """SR-LO layers back to back: bit-exact against the golden model, the LFSR state carried from layer to layer."""
    bench = await start_system(dut)
    harness = Harness(bench)
    valid, ready = 0.7, 0.6
    for source in harness.sources():
        source.valid_probability = valid
    for sink in harness.host_data:
        sink.ready_probability = ready
    generator = np.random.default_rng(bench.seed + 2)
    frac = bench.params["frac_bits"]
    if not (bench.params["rounding"] == "sr_lo" and frac > 0):
        dut._log.info("no SR-LO in these parameters: nothing to carry")
        return
    layers, inputs = [], []
    for kind, dims in table.sr_dims(bench.params):
        layer = compile_for_system(kind, dims, sr=True, bits=32, **bench.params)
        tensors = table.sr_inputs(bench.params, generator, layer)
        layers.append(layer)
        inputs.append(tensors)
        expected = run_layers(layers, inputs, **bench.params)[-1]
        if len(layers) > 1:
            fresh = executor.execute(layer, tensors)["output"]
            assert not np.array_equal(expected["output"], fresh), \
                f"SR-LO {kind}: the carried LFSR state makes no difference, the test would not see it {bench.where()}"
        final = await run_layer(harness, layer, tensors, f"SR-LO {kind}")
        for vault, words in final.items():
            want = expected["final"][vault]
            bad = np.flatnonzero(words != want)
            assert bad.size == 0, (f"SR-LO {kind}: vault {vault} word {bad[0]} expected {int(want[bad[0]]):#x}, got "
                                   f"{int(words[bad[0]]):#x} ({bad.size} mismatches) {bench.where()}")


@cocotb.test()
async def reset_mid_layer(dut):
    """A reset in the middle of a layer leaves an idle system; a table scenario after it (fresh state) is exact."""
    bench = await start_system(dut)
    harness = Harness(bench)
    scenarios = table.scenarios(bench.params, bench.seed + 3)
    busy = scenarios[0]
    harness.handshakes(busy.valid, busy.ready)
    layer = busy.stimulus["layers"][bench.rng.randrange(len(busy.stimulus["layers"]))]
    compiled = table.compile_layer(bench.params, layer)
    await host_write(harness, input_images(compiled, layer["inputs"]), "before reset")
    queue_layer(harness, compiled)
    for _ in range(bench.rng.randrange(10, 200)):
        await RisingEdge(dut.clk)
    harness.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert dut.idle.value == 1, f"system not idle after a reset in the middle of {layer['kind']} {bench.where()}"
    await RisingEdge(dut.clk)
    await play(harness, scenarios[2])


class RegressionHarness:
    """The system's :class:`Harness` as ``regression.run_regression`` wants it (``make regress TRANSACTIONS=N``).

    Every scenario is checked by :func:`play`, exactly as ``scenario_table`` checks it. A **transaction** of
    ``nt_system`` is one accepted beat on a stream port the testbench drives, as its monitors record it: a host
    request (``i_host__<v>``: the writes of the input images and the read-back requests), a word read back
    (``o_host_data__<v>``), a PMAG program (``i_read_program__<v>``, ``i_write_program__<v>``) or a PE pass word
    (``i_pe_program__<pe>``). ``i_ibuffer`` and ``i_start`` stay idle (valid 0), as in ``scenario_table``.

    A reset mid-stream (:meth:`start`) interrupts one layer of the scenario, chosen with a delay from the scenario's
    own data, so that its scenario seed replays it: the layer runs alone (:func:`run_layer`: its host writes, its
    programs), and after the delay (below the layer's longest vault image plus the module model's cycles of the
    layer, ``program_time.layer_time``) and ``run_regression``'s own few cycles the system is reset. The log names
    the layer and its phase then (:meth:`phase`): host writes, running, or read-back. ``run_regression``'s cycles
    alone (below twice the scenario's layer count plus 12) would fall in the first layer's host writes every time.

    The vaults and the PE buffers keep their words through a reset (``power_on_vaults_read_zero``). Every layer
    starts from the host's writes of every vault word its programs use (``integration_layers.host_images``, zeros
    included). The table's expectations (the reference executor) know of no other word in the vaults or the PE
    buffers, so a layer that read one left by an earlier scenario or by the interrupted layer would differ from them
    (unless the old word happened to equal the expected one).
    """

    def __init__(self, bench):
        for name in IDLE_INPUTS:
            getattr(bench.dut, f"{name}__valid").value = 0
        self.harness = harness = Harness(bench)
        self.sources = {harness.names[id(source)]: source for source in harness.sources()}
        self.sinks = {harness.names[id(sink)]: sink for sink in harness.host_data}
        params = bench.params
        self.timing = ModuleTiming(vault_latency=params["vault_latency"], vault_interval=params["vault_interval"],
                                   broadcast_credits=params["broadcast_credits"])
        self.traffic = None

    async def play(self, scenario):
        await play(self.harness, scenario)

    async def start(self, scenario):
        bench = self.harness.bench
        layers = scenario.stimulus["layers"]
        rng = rng_for(scenario.name, "reset in a layer", scenario.expected["output"])
        number = rng.randrange(len(layers))
        layer = layers[number]
        compiled = table.compile_layer(bench.params, layer)
        images = input_images(compiled, layer["inputs"])
        try:
            cycles = layer_time(compiled, self.timing).cycles
        except ValueError:      # no PE job to time
            cycles = 0
        self.harness.handshakes(scenario.valid, scenario.ready)
        self.writes_done = sum(len(source.sent) for source in self.harness.host) + sum(
            words.size for words in images.values())
        self.traffic = cocotb.start_soon(run_layer(self.harness, compiled, layer["inputs"], "before a reset",
                                                   table.system_config(layer, compiled)))
        delay = rng.randrange(max(words.size for words in images.values()) + cycles + 1)
        for _ in range(delay):
            await RisingEdge(bench.dut.clk)
        self.interrupted = (f"{scenario.name}: a reset mid-stream in layer {number + 1} of {len(layers)} "
                            f"({layer['kind']} {layer['dims']}), {delay} cycles after its host writes began plus the "
                            f"regression's")

    def phase(self):
        """Where the interrupted layer is: ``host writes`` (not all of its image words written yet), ``running``
        (programs not all taken, or the system not idle) or ``read-back`` (idle: the host reads the vaults)."""
        harness = self.harness
        if sum(len(source.sent) for source in harness.host) < self.writes_done:
            return "host writes"
        programs = (*harness.read_program, *harness.write_program, *harness.pe_program)
        if not all(source.idle for source in programs) or harness.bench.dut.idle.value != 1:
            return "running"
        return "read-back"

    def drop(self):
        if self.traffic is not None:
            self.harness.bench.dut._log.info("%s, in phase: %s", self.interrupted, self.phase())
            if not self.traffic.done():
                self.traffic.kill()
        self.traffic = None
        self.harness.drop()


#: How far the module model (``sim/neurotrainer/program_time.py``) may be from the RTL's cycle count of a
#: layer: a fraction of the RTL's count plus a constant (README, "System model": what the model leaves out).
MODEL_RELATIVE_BOUND = 0.10
MODEL_CONSTANT_BOUND = 40


@cocotb.test()
async def model_cycles(dut):
    """The RTL's cycles per layer at full rate, from queueing its programs to ``idle``, against the module model.

    Writes ``model_cycles.json`` (kind, dims, RTL and model cycles) in the run folder.
    """
    bench = await start_system(dut)
    harness = Harness(bench)
    params = bench.params
    timing = ModuleTiming(vault_latency=params["vault_latency"], vault_interval=params["vault_interval"],
                          broadcast_credits=params["broadcast_credits"])
    generator = np.random.default_rng(bench.seed)
    rows = []
    for kind, dims in table.timed_dims(params):
        layer = compile_for_system(kind, dims, **params)
        inputs, _ = table.make_inputs(kind, dims, generator, params["frac_bits"],
                                       tiled=bool(layer.copy_jobs))
        await host_write(harness, input_images(layer, inputs), f"timed {kind}")
        await RisingEdge(dut.clk)
        queue_layer(harness, layer)
        first = bench.cycle.now
        limit = sum(len(job.passes) * 300 for job in layer.pe_jobs) + 20 * sum(layer.vault_words.values()) + 2000
        for _ in range(limit):
            await RisingEdge(dut.clk)
            await ReadOnly()
            if all(source.idle for source in harness.sources()) and bench.cycle.now - first > 2 \
                    and dut.idle.value == 1:
                break
        rtl = bench.cycle.now - first
        assert dut.idle.value == 1, f"timed {kind} {dims}: not idle after {limit} cycles {bench.where()}"
        await RisingEdge(dut.clk)
        model = layer_time(layer, timing).cycles
        rows.append({"kind": kind, "dims": dims, "bits": layer.bits, "rtl": rtl, "model": model})
        dut._log.info("timed %s %s: RTL %d cycles, model %d (%+.1f %%)", kind, dims, rtl, model,
                      100 * (model - rtl) / rtl)
    with open("model_cycles.json", "w") as handle:
        json.dump({"params": params, "layers": rows}, handle, indent=1)
    bad = [row for row in rows if abs(row["model"] - row["rtl"]) > MODEL_RELATIVE_BOUND * row["rtl"]
           + MODEL_CONSTANT_BOUND]
    assert not bad, f"module model beyond {MODEL_RELATIVE_BOUND:.0%} + {MODEL_CONSTANT_BOUND} cycles: {bad} " \
                    f"{bench.where()}"


@cocotb.test()
async def no_combinational_ready_path(dut):
    """No input stream's ``ready`` (host, PMAG programs, PE passes) follows an ``o_host_data`` ``ready`` within a cycle.

    Random host requests (reads and writes) and random program words; what the system does with
    them does not matter here, only that every input's ``ready`` is settled by the clock edge.
    """
    bench = await start_system(dut)
    vaults, pes = bench.component.pes + 1, bench.component.pes
    inputs, outputs = stream_ports(bench)
    assert len(inputs) == 3 * vaults + pes + 2 and len(outputs) == vaults, \
        f"stream ports not found: {inputs} {outputs} {bench.where()}"
    await check_no_ready_path(bench, inputs, outputs, cycles=60, ready_period=7)


@cocotb.test()
async def sequenced_program(dut):
    """Multi-layer programs run by the iBuffer / layer sequencer: the host loads the vaults and the iBuffer once,
    starts the program and reads the vaults back when ``busy`` falls; no program word or ``config`` from the
    testbench. Every layer's output equals numpy (integer program) or the reference executor / the golden model's
    carried run (SR-LO), and every vault word the golden model's run (``sim/neurotrainer/layer_chain.py``)."""
    bench = await start_system(dut)
    harness = Harness(bench)
    component, params = bench.component, bench.params
    ibuffer = StreamSource(dut, "i_ibuffer", bench.cycle, bench.rng, valid_probability=0.8)
    start_program = StreamSource(dut, "i_start", bench.cycle, bench.rng)
    for number, program in enumerate(table.sequenced_programs(params, bench.seed)):
        if number:
            await bench.reset()
        layers, images, name = program["layers"], program["images"], program["name"]
        used = {vault + 1: max(layer.vault_words[vault] for layer in layers) for vault in layers[0].vault_words}
        await host_write(harness, {vault: images[vault][:words] for vault, words in used.items()}, name)
        loads, count = sequencer_loads(params, system_program(layers, component.pes))
        ibuffer.send([pack(component.ibuffer_load_layout, load) for load in loads])
        await bench.wait_until(lambda: ibuffer.idle, 4 * len(loads) + 100, f"the iBuffer loads ({name})")
        start_program.send([count])
        await bench.wait_until(lambda: start_program.idle, 100, f"the start ({name})")
        await RisingEdge(dut.clk)
        limit = sum(len(job.passes) * 300 for layer in layers for job in layer.pe_jobs) + \
            20 * sum(words for layer in layers for words in layer.vault_words.values()) + 2000
        await bench.wait_until(lambda: dut.busy.value == 0, limit, f"the end of the program ({name})")
        assert all(source.idle for source in harness.sources()), f"{name}: the testbench sent program words"
        final = await host_read(harness, used, name)
        expected = run_program(layers, images, **params)
        for layer, want, result in zip(layers, program["outputs"], expected):
            got = executor.unload(layer, {vault - 1: words for vault, words in final.items()})
            assert np.array_equal(got, np.asarray(want)), (
                f"{name}: {layer.kind} {layer.dims} output {got.tolist()}, expected {np.asarray(want).tolist()} "
                f"{bench.where()}")
        for vault, words in final.items():
            want = expected[-1]["final"][vault][:words.size]
            bad = np.flatnonzero(words != want)
            assert bad.size == 0, (f"{name}: vault {vault} word {bad[0]} expected {int(want[bad[0]]):#x}, got "
                                   f"{int(words[bad[0]]):#x} ({bad.size} mismatches) {bench.where()}")
        dut._log.info("%s: %d layers run by the sequencer, %d iBuffer loads", name, count, len(loads))


@cocotb.test()
async def sgd_step_mlp(dut):
    """One SGD step of a two-layer MLP on the system (``sim/neurotrainer/system_training.py``): FF, FF through f(x),
    the loss gradient from the host, BP (SR-LO), f'(z)·dx (SR-LO), two weight gradients (SR-LO), the update by the
    host. Each layer's inputs are the host's moves of the RTL's own earlier outputs; every layer's output and both
    updated weight matrices must equal the golden step bit for bit."""
    bench = await start_system(dut)
    harness = Harness(bench)
    params = bench.params
    if not (params["rounding"] == "sr_lo" and params["frac_bits"] == params["lut_frac_bits"]
            == params["lut_out_frac_bits"]):
        dut._log.info("the SGD step needs SR-LO and frac_bits = lut_frac_bits = lut_out_frac_bits: not run")
        return
    problem = table.sgd_problem(params, bench.seed)
    w1, w2, x, target = (np.asarray(problem[name]) for name in ("w1", "w2", "x", "target"))
    expected = sgd_step(w1, w2, x, target, grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"], **params)
    layers = sgd_layers(x.shape[0], w1.shape[0], w2.shape[0], x.shape[1], **params)
    outputs = {}
    for name, kind, _ in SGD_LAYERS:
        layer = layers[name]
        inputs = layer_inputs(name, outputs, w1, w2, x, target, problem["grad_shift"])
        final = await run_layer(harness, layer, inputs, f"SGD {name} ({kind})")
        outputs[name] = executor.unload(layer, {vault - 1: words for vault, words in final.items()})
        want = expected["outputs"][name]
        assert np.array_equal(outputs[name], want), (
            f"SGD step, {name} ({kind}): output {outputs[name].tolist()}, golden step {want.tolist()} {bench.where()}")
    for label, weights, gradient, want in (("W1", w1, outputs["up1"], expected["w1"]),
                                           ("W2", w2, outputs["up2"], expected["w2"])):
        got = update(weights, gradient, problem["lr_shift"])
        assert np.array_equal(got, want), f"SGD step: updated {label} {got.tolist()}, golden {want.tolist()} " \
                                          f"{bench.where()}"
    dut._log.info("SGD step: %d layers, W1 %s and W2 %s updated bit-exactly", len(SGD_LAYERS), w1.shape, w2.shape)


async def host_write_words(harness, writes, label):
    """The host's writes ``{system vault: {word address: word}}``, every vault's in parallel."""
    layout = harness.component.host_layout
    for vault, words in writes.items():
        harness.host[vault].send([pack(layout, {"address": address, "write": 1, "data": int(word) & 0xFFFFFFFF})
                                  for address, word in sorted(words.items())])
    longest = max((len(words) for words in writes.values()), default=0)
    await harness.bench.wait_until(lambda: all(source.idle for source in harness.host), 20 * longest + 100,
                                   f"host writes ({label})")


async def run_sequenced(harness, ibuffer, start_program, layers, loads, count, label):
    """Load one iBuffer run, start it, and wait for ``busy`` to fall; no program word from the testbench."""
    bench, component = harness.bench, harness.component
    ibuffer.send([pack(component.ibuffer_load_layout, load) for load in loads])
    await bench.wait_until(lambda: ibuffer.idle, 4 * len(loads) + 100, f"the iBuffer loads ({label})")
    start_program.send([count])
    await bench.wait_until(lambda: start_program.idle, 100, f"the start ({label})")
    await RisingEdge(bench.dut.clk)
    limit = sum(len(job.passes) * 300 for layer in layers for job in layer.pe_jobs) + \
        20 * sum(words for layer in layers for words in layer.vault_words.values()) + 2000
    await bench.wait_until(lambda: bench.dut.busy.value == 0, limit, f"the end of the run ({label})")
    assert all(source.idle for source in harness.sources()), f"{label}: the testbench sent program words"
    return count, len(loads)


async def run_placed_step(harness, program, host_tensors, expected, read, label):
    """Run a placed step (``sim/neurotrainer/step_program.py``) run after run: before each run the host's writes
    (the first: every used word, zeros around the tensors, as the golden run starts), one iBuffer load and one
    start per run, no program word from the testbench. After each run every used vault word must equal the golden
    run's, and the outputs named in ``read[run]`` (read back by the host) the golden outputs. Returns the outputs
    read, by name (the host's next writes come from them)."""
    bench = harness.bench
    ibuffer = StreamSource(bench.dut, "i_ibuffer", bench.cycle, bench.rng, valid_probability=0.8)
    start_program = StreamSource(bench.dut, "i_start", bench.cycle, bench.rng)
    used = {}
    for layer in program.layers.values():
        for vault, words in layer.vault_words.items():
            used[vault + 1] = max(used.get(vault + 1, 0), words)
    outputs, runs = {}, ibuffer_runs(program, **bench.params)
    for run, names in enumerate(program.runs):
        where = f"{label} run {run + 1} ({', '.join(names)})"
        writes = host_image_writes(program, run, host_tensors(run, outputs))
        if run == 0:
            writes = {vault: {address: writes.get(vault, {}).get(address, 0) for address in range(words)}
                      for vault, words in used.items()}
        await host_write_words(harness, writes, where)
        layers = [program.layers[name] for name in names]
        count, loads = await run_sequenced(harness, ibuffer, start_program, layers, *runs[run], where)
        final = await host_read(harness, used, where)
        for vault, words in final.items():
            want = expected["finals"][run][vault][:words.size]
            bad = np.flatnonzero(words != want)
            assert bad.size == 0, (f"{where}: vault {vault} word {bad[0]} expected {int(want[bad[0]]):#x}, got "
                                   f"{int(words[bad[0]]):#x} ({bad.size} mismatches) {bench.where()}")
        vaults = {vault - 1: words for vault, words in final.items()}
        for name in read[run]:
            outputs[name] = executor.unload(program.layers[name], vaults)
            assert np.array_equal(outputs[name], expected["outputs"][name]), (
                f"{where}: {name} output {outputs[name].tolist()}, golden {expected['outputs'][name].tolist()} "
                f"{bench.where()}")
        bench.dut._log.info("%s: %d layers run by the sequencer, %d iBuffer loads", where, count, loads)
    return outputs


def _step_parameters(dut, params):
    if params["rounding"] == "sr_lo" and params["frac_bits"] == params["lut_frac_bits"] == \
            params["lut_out_frac_bits"]:
        return True
    dut._log.info("the SGD step needs SR-LO and frac_bits = lut_frac_bits = lut_out_frac_bits: not run")
    return False


@cocotb.test()
async def sequenced_sgd_step_mlp(dut):
    """One SGD step of a two-layer MLP run by the iBuffer / layer sequencer (``sim/neurotrainer/sequenced_training.py``):
    the host loads the weights and inputs once, runs the forward pass (2 layers), reads ``z2``, writes the loss
    gradient, runs the backward pass and the weight gradients (5 layers, SR-LO, the LFSR carried), reads ``dW`` and
    updates. Every vault word after each run, every read output and both updated weights equal the golden step."""
    bench = await start_system(dut)
    harness = Harness(bench)
    params = bench.params
    if not _step_parameters(dut, params):
        return
    problem = table.sgd_problem(params, bench.seed, samples=table.sequenced_samples(params))
    w1, w2, x, target = (np.asarray(problem[name]) for name in ("w1", "w2", "x", "target"))
    try:
        expected = sequenced_sgd_step(w1, w2, x, target, grad_shift=problem["grad_shift"],
                                      lr_shift=problem["lr_shift"], **params)
    except ProgramError as error:
        dut._log.info("the sequenced step does not chain with these parameters (%s): not run", error)
        return
    outputs = await run_placed_step(harness, expected["program"],
                                    sgd_host_tensors(w1, w2, x, target, problem["grad_shift"]), expected,
                                    (("ff2",), ("up1", "up2")), "MLP SGD")
    for name, weights, gradient, want in (("W1", w1, outputs["up1"], expected["w1"]),
                                          ("W2", w2, outputs["up2"], expected["w2"])):
        got = update(weights, gradient, problem["lr_shift"])
        assert np.array_equal(got, want), f"sequenced SGD step: updated {name} {got.tolist()}, golden " \
                                          f"{want.tolist()} {bench.where()}"
    dut._log.info("sequenced SGD step: %d runs, W1 %s and W2 %s updated bit-exactly", len(expected["program"].runs),
                  w1.shape, w2.shape)


@cocotb.test()
async def sequenced_sgd_step_cnn(dut):
    """One SGD step of a small CNN (``sim/neurotrainer/cnn_training.py``: conv, f(x), max pooling, FC, the host's loss
    gradient, FC BP and UP, max-pooling backward, f'(z)·dY, conv UP; SR-LO) run by the sequencer in five runs, the host
    between them only for the loss gradient and the three vault-to-vault moves the system cannot make. Every vault
    word after each run, every output the host reads and both updated weights equal the golden step."""
    bench = await start_system(dut)
    harness = Harness(bench)
    params = bench.params
    if not _step_parameters(dut, params):
        return
    problem = table.cnn_problem(params, bench.seed)
    x, wc, w, target = (np.asarray(problem[name]) for name in ("x", "wc", "w", "target"))
    try:
        expected = cnn_sgd_step(x, wc, w, target, grad_shift=problem["grad_shift"], lr_shift=problem["lr_shift"],
                                **params)
    except ProgramError as error:
        dut._log.info("the CNN step does not fit these parameters (%s): not run", error)
        return
    outputs = await run_placed_step(harness, expected["program"],
                                    cnn_host_tensors(x, wc, w, target, problem["grad_shift"]), expected,
                                    (("pool",), ("fc",), ("fcbp", "fcup"), ("act",), ("convup",)), "CNN SGD")
    for name, weights, gradient, want in (("Wc", wc, outputs["convup"], expected["wc"]),
                                          ("W", w, outputs["fcup"], expected["w"])):
        got = update(weights, gradient, problem["lr_shift"])
        assert np.array_equal(got, want), f"CNN SGD step: updated {name} {got.tolist()}, golden " \
                                          f"{want.tolist()} {bench.where()}"
    dut._log.info("CNN SGD step: %d runs, Wc %s and W %s updated bit-exactly", len(expected["program"].runs),
                  wc.shape, w.shape)


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets in the middle of a layer,
# every scenario checked by play (RegressionHarness).
random_regression = regression_test(table, harness=RegressionHarness)
