"""cocotb testbench of ``nt_sequencer``: its scenario table, with a model of the system's ``idle``, and a reset mid-run.

The system's ``idle`` is modelled here: it falls in every cycle a program word is taken and rises
``system_idle_delay`` cycles after the last one. Checked for every scenario: every queue's words
as ``(run, layer, word)`` (run: the ``i_start`` it belongs to, layer: ``o_layer`` when it was
taken) and each layer's ``o_config`` (at the layer's last cycle) against the table; every word
taken while ``o_config`` is its layer's; no word of a layer taken before the system was idle
after the previous layer's last word (so before ``last + delay``).

``random_regression`` (``make regress``, :mod:`regression`) plays the same table over and over with
fresh seeds, backpressure and resets mid-stream, through :class:`RegressionHarness`.
"""
import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack
from trainforge.spec.neurotrainer import sequencer as spec

import scenarios.nt_sequencer as table
from regression import regression_test
from scenario import Transactions, check_transactions
from tbutil import start


class Harness:
    """Drivers of every stream, the ``system_idle`` model and a per-cycle record of ``busy``, ``o_layer``, ``o_config``."""

    def __init__(self, bench):
        self.bench, dut = bench, bench.dut
        self.load = StreamSource(dut, "i_load", bench.cycle, bench.rng)
        self.start = StreamSource(dut, "i_start", bench.cycle, bench.rng)
        self.ports = table.port_names(bench.params)
        self.sinks = {port: StreamSink(dut, port, bench.cycle, bench.rng) for port in self.ports}
        self.delay = 0
        self.last_take = -10 ** 9
        self.record = {}            # cycle -> (busy, layer, config bits)
        dut.system_idle.value = 1
        cocotb.start_soon(self._system())

    async def _system(self):
        dut = self.bench.dut
        while True:
            await RisingEdge(dut.clk)
            dut.system_idle.value = int(self.bench.cycle.now - self.last_take > self.delay)
            await ReadOnly()
            now = self.bench.cycle.now
            if any(getattr(dut, f"{port}__valid").value == 1 and getattr(dut, f"{port}__ready").value == 1
                   for port in self.ports):
                self.last_take = now
            self.record[now] = (int(dut.busy.value), int(dut.o_layer.value), int(dut.o_config.value))


async def play(harness, scenario):
    bench, dut = harness.bench, harness.bench.dut
    params = bench.params
    config_layout = spec.config_layout()
    await FallingEdge(dut.clk)
    harness.delay = scenario.stimulus["system_idle_delay"]
    harness.load.follow(scenario.valid.get("i_load", (1,)))
    for port, sink in harness.sinks.items():
        sink.follow(scenario.ready.get(port, (1,)))
    first_received = {port: len(sink.received) for port, sink in harness.sinks.items()}
    first_start = len(harness.start.sent)
    layout = bench.component.load_layout
    loads = scenario.stimulus["i_load"]
    harness.load.send([pack(layout, load) for load in loads])
    await bench.wait_until(lambda: harness.load.idle, 4 * len(loads) + 100, f"the loads of '{scenario.name}'")
    runs = scenario.stimulus["i_start"]
    harness.start.send(list(runs))
    words = sum(len(items) for port, items in scenario.expected.items() if port != "o_config")
    layers = sum(runs)
    limit = 20 * words + (harness.delay + 20) * (layers + len(runs)) + 200
    await bench.wait_until(lambda: harness.start.idle, limit, f"the runs of '{scenario.name}'")
    await RisingEdge(dut.clk)
    await bench.wait_until(lambda: dut.busy.value == 0, limit, f"the end of '{scenario.name}'")
    for _ in range(4):
        await RisingEdge(dut.clk)
    started = [cycle for cycle, _ in harness.start.sent[first_start:]]

    def run_of(cycle):
        return sum(1 for begin in started if begin < cycle) - 1

    items, takes = {}, {}
    for port, sink in harness.sinks.items():
        items[port] = []
        for cycle, word in sink.received[first_received[port]:]:
            busy, layer, config = harness.record[cycle]
            run = run_of(cycle)
            items[port].append((run, layer, word))
            takes.setdefault((run, layer), []).append(cycle)
            want = scenario.expected["o_config"][run][layer] if 0 <= run < len(runs) and layer < runs[run] else None
            got = {name: int(getattr(unpack(config_layout, config), name)) for name, _ in config_layout}
            assert busy and got == want, (f"{scenario.name}: {port} word {word:#x} taken in cycle {cycle} (run {run}, "
                                          f"layer {layer}, busy {busy}) with o_config {got}, expected {want} "
                                          f"{bench.where()}")
    # Each layer's config: o_config in the layer's last busy cycle, per run.
    configs = [[] for _ in runs]
    last = {}
    for cycle in sorted(harness.record):
        busy, layer, config = harness.record[cycle]
        run = run_of(cycle)
        if busy and 0 <= run < len(runs) and cycle > started[run]:
            last[run, layer] = config
    for run, layers_run in enumerate(runs):
        for layer in range(layers_run):
            if (run, layer) in last:
                bits = last[run, layer]
                configs[run].append({name: int(getattr(unpack(config_layout, bits), name)) for name, _ in config_layout})
    items["o_config"] = configs
    check_transactions(scenario, Transactions(items), bench.where())
    # A layer's words only after the system was idle behind the previous layer's last word.
    for run, layers_run in enumerate(runs):
        previous = None
        for layer in range(layers_run):
            cycles = takes.get((run, layer))
            if not cycles:
                continue
            if previous is not None:
                assert min(cycles) - max(previous) > harness.delay, (
                    f"{scenario.name}: run {run} layer {layer}'s first word in cycle {min(cycles)}, the previous "
                    f"layer's last in {max(previous)}: the system was not idle yet (delay {harness.delay}) "
                    f"{bench.where()}")
            previous = cycles


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/nt_sequencer.py``, each after a reset."""
    bench = await start(dut)
    harness = Harness(bench)
    for index, scenario in enumerate(table.scenarios(bench.params, bench.seed)):
        if index:
            await bench.reset()
        await play(harness, scenario)


@cocotb.test()
async def reset_mid_run(dut):
    """A reset in the middle of a run leaves the sequencer idle with nothing offered; a run after it is exact."""
    bench = await start(dut)
    harness = Harness(bench)
    scenarios = table.scenarios(bench.params, bench.seed + 1)
    busy = scenarios[1]
    harness.delay = busy.stimulus["system_idle_delay"]
    harness.load.send([pack(bench.component.load_layout, load) for load in busy.stimulus["i_load"]])
    await bench.wait_until(lambda: harness.load.idle, 4 * len(busy.stimulus["i_load"]) + 100, "the loads")
    harness.start.send(list(busy.stimulus["i_start"]))
    for _ in range(bench.rng.randrange(3, 40)):
        await RisingEdge(dut.clk)
    harness.start.drop()
    await bench.reset(cycles=2)
    await ReadOnly()
    offered = [port for port in harness.ports if getattr(dut, f"{port}__valid").value == 1]
    assert dut.busy.value == 0 and not offered, \
        f"after a reset mid-run: busy {dut.busy.value}, words offered on {offered} {bench.where()}"
    await RisingEdge(dut.clk)
    await play(harness, scenarios[0])


class RegressionHarness:
    """The random regression's harness (the members :class:`regression.TableHarness` documents) over :class:`Harness`
    and :func:`play`: ``sources`` are ``i_load`` and ``i_start``, ``sinks`` every queue, ``play`` checks a
    scenario as ``scenario_table`` does.

    ``start`` runs :func:`play` in the background (its loads, then its runs, under the scenario's patterns);
    ``drop`` ends it unchecked and drops what the sources hold, before the regression's reset mid-stream.
    """

    def __init__(self, bench):
        self.harness = Harness(bench)
        self.sources = {"i_load": self.harness.load, "i_start": self.harness.start}
        self.sinks = self.harness.sinks
        self._traffic = None

    async def play(self, scenario):
        # play reads only the cycles from its own runs on: forgetting the older ones keeps a long run's memory
        # and its per-scenario scan of the record flat.
        self.harness.record.clear()
        await play(self.harness, scenario)

    async def start(self, scenario):
        self.harness.record.clear()
        self._traffic = cocotb.start_soon(self._unchecked(scenario))

    async def _unchecked(self, scenario):
        try:
            await play(self.harness, scenario)
        except AssertionError:
            pass            # traffic before a reset mid-stream is not checked

    def drop(self):
        if self._traffic is not None and not self._traffic.done():
            self._traffic.kill()
        self._traffic = None
        self.harness.load.drop()
        self.harness.start.drop()


random_regression = regression_test(table, harness=RegressionHarness)
