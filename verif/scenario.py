"""Scenarios written once: the same table drives the golden model in-process and the RTL under cocotb.

A block's scenario module, ``verif/scenarios/<block>.py``, defines

``scenarios(params, seed) -> list of Scenario``
    Directed and random scenarios for one parameter set. The expected
    transactions come from a *reference* that is independent of the golden
    model (plain Python integer arithmetic, numpy's own functions, or values
    worked out by hand), so the golden model is tested too.
``golden(params, scenario) -> Transactions``
    Runs the golden model in-process on the scenario's stimulus and returns
    what it predicts on each output port (and, for a cycle model, when).

``verif/test_scenarios.py`` checks every block's golden model against every
table; the block's cocotb testbench runs the same tables on the RTL with
:func:`run_on_rtl`, with the same per-cycle ``valid`` and ``ready`` patterns.

Payload items are what the block's ``lib.data`` layout takes as a constant
(an int for a plain shape, a dict or list for a layout); the RTL side packs
them with the port's own layout, never with hand-written offsets.
"""
import random
from dataclasses import dataclass, field

__all__ = ["Scenario", "Transactions", "random_pattern", "check_transactions", "run_on_rtl"]


@dataclass(frozen=True)
class Scenario:
    """One stimulus with its expected transactions.

    Parameters
    ----------
    name : str
        Shown in failure messages.
    stimulus : dict
        Input stream port name -> list of payload items, sent in order.
    expected : dict
        Output stream port name -> list of expected payload items, in order.
    valid : dict
        Input port -> per-cycle pattern (sequence of 0/1, repeated) of when the
        producer starts offering its next item. A port not named offers every cycle.
    ready : dict
        Output port -> per-cycle ``ready`` pattern (repeated). A port not named is always ready.
    timing : dict
        Output port -> expected cycle of each output transfer, counted from the
        first input transfer of the scenario. Only where the block has a cycle
        contract (a latency, or a golden cycle model); checked on the RTL and,
        where the golden model returns cycles, in-process too.
    """
    name: str
    stimulus: dict
    expected: dict
    valid: dict = field(default_factory=dict)
    ready: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)

    @property
    def transfers(self):
        """Input items of the scenario; a stimulus value that is a single number (``nt_sequencer``'s
        ``system_idle_delay``, a setting of its testbench's model of the system) is not a stream."""
        return sum(len(items) for items in self.stimulus.values() if not isinstance(items, int))


@dataclass
class Transactions:
    """What a model or the RTL produced: output port -> items, and (optionally) output port -> cycles."""
    items: dict
    cycles: dict = field(default_factory=dict)


def random_pattern(rng, probability, length=61):
    """A per-cycle 0/1 pattern, high with ``probability``; a prime length so that two patterns do not lock step."""
    if probability >= 1:
        return (1,)
    return tuple(int(rng.random() < probability) for _ in range(length)) or (1,)


def _first_difference(expected, actual):
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            return index, want, got
    return None


def check_transactions(scenario, actual, where=""):
    """Compare :class:`Transactions` with the scenario's expectation; raise ``AssertionError`` naming the first difference."""
    for port, expected in scenario.expected.items():
        got = list(actual.items.get(port, ()))
        assert len(got) == len(expected), (
            f"{scenario.name}: {port} expected {len(expected)} transactions, got {len(got)} {where}")
        difference = _first_difference(list(expected), got)
        assert difference is None, (
            f"{scenario.name}: {port} transaction {difference[0]} expected {difference[1]!r}, got {difference[2]!r} {where}")
    for port, expected_cycles in scenario.timing.items():
        if port not in actual.cycles:
            continue
        got = list(actual.cycles[port])
        difference = _first_difference(list(expected_cycles), got)
        assert difference is None and len(got) == len(expected_cycles), (
            f"{scenario.name}: {port} transfer {difference[0] if difference else len(got)} expected at cycle "
            f"{difference[1] if difference else len(expected_cycles)}, got {difference[2] if difference else len(got)} {where}")


async def run_on_rtl(bench, scenario, sources, sinks, decode, encode, timeout_per_transfer=40):
    """Run one scenario on the RTL through the bench's stream drivers and check it.

    Parameters
    ----------
    bench : tbutil.Bench
    scenario : Scenario
    sources, sinks : dict
        Port name -> :class:`streams.StreamSource` / :class:`streams.StreamSink`, made once per cocotb test.
    decode : callable
        ``decode(port, bits) -> item``, the RTL's payload bits in the table's representation.
    encode : callable
        ``encode(port, item) -> bits`` for the stimulus.
    """
    from cocotb.triggers import FallingEdge, RisingEdge

    await FallingEdge(bench.dut.clk)  # patterns start on the next rising edge, for every driver alike
    first_sent = {port: len(source.sent) for port, source in sources.items()}
    first_received = {port: len(sink.received) for port, sink in sinks.items()}
    for port, source in sources.items():
        source.follow(scenario.valid.get(port, (1,)))
        source.send([encode(port, item) for item in scenario.stimulus.get(port, ())])
    for port, sink in sinks.items():
        sink.follow(scenario.ready.get(port, (1,)))
    wanted = {port: len(items) for port, items in scenario.expected.items()}

    def done():
        return all(source.idle for source in sources.values()) and all(
            len(sinks[port].received) - first_received[port] >= count for port, count in wanted.items())

    await bench.wait_until(done, timeout=timeout_per_transfer * (scenario.transfers + 10) + 200,
                           what=f"the transactions of scenario '{scenario.name}'")
    for _ in range(8):  # nothing extra may follow
        await RisingEdge(bench.dut.clk)
    sent_cycles = [cycle for port, source in sources.items() for cycle, _ in source.sent[first_sent[port]:]]
    start = min(sent_cycles) if sent_cycles else 0
    items, cycles = {}, {}
    for port, sink in sinks.items():
        received = sink.received[first_received[port]:]
        items[port] = [decode(port, bits) for _, bits in received]
        cycles[port] = [cycle - start for cycle, _ in received]
    check_transactions(scenario, Transactions(items, cycles), bench.where())


def rng_for(seed, *labels):
    """A ``random.Random`` for one scenario, from the test's seed and the scenario's labels."""
    return random.Random(f"{seed}:" + ":".join(map(str, labels)))


def payload_shapes(component):
    """Stream port name -> (direction, payload shape) of every ``lib.stream`` member of a component's signature."""
    from amaranth.lib import stream, wiring

    ports = {}
    for name, member in component.signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            ports[name] = ("in" if member.flow == wiring.In else "out", member.signature.members["payload"].shape)
    return ports


def to_bits(shape, item):
    """The bits of ``item`` as a payload of ``shape`` (a plain shape or a ``lib.data`` layout), as a non-negative int."""
    from amaranth.hdl import Const, Shape, ShapeCastable

    from amaranth.lib import data, enum

    width = Shape.cast(shape).width
    if isinstance(shape, data.StructLayout) and isinstance(item, dict):
        # Field by field at the layout's own offsets, so that a field can hold a value its shape's ``const``
        # refuses (an op code that is no member of its enum: a command the block must reject).
        value = 0
        for name, member in shape:
            value |= to_bits(member.shape, item[name]) << member.offset
    elif isinstance(shape, enum.EnumType) and not isinstance(item, shape):
        value = Const(int(item), Shape.cast(shape)).value
    elif isinstance(shape, ShapeCastable):
        value = Const.cast(shape.const(item)).value
    else:
        value = Const(item, Shape.cast(shape)).value
    return value & ((1 << width) - 1)


def _stream_drivers(bench):
    """``(shapes, sources, sinks, encode)``: a driver on every stream port of the block, made once per cocotb test."""
    from trainforge.cocotb_streams import StreamSink, StreamSource

    shapes = payload_shapes(bench.component)
    sources = {port: StreamSource(bench.dut, port, bench.cycle, bench.rng)
               for port, (direction, _) in shapes.items() if direction == "in"}
    sinks = {port: StreamSink(bench.dut, port, bench.cycle, bench.rng)
             for port, (direction, _) in shapes.items() if direction == "out"}

    def encode(port, item):
        return to_bits(shapes[port][1], item)

    return shapes, sources, sinks, encode


def _in_bits(bench, module, scenario, encode, golden_cycles):
    """The scenario with its expected payloads as bits and, with ``golden_cycles``, the golden model's output cycles."""
    timing = dict(scenario.timing)
    if golden_cycles:
        predicted = module.golden(bench.params, scenario)
        for port, cycles in predicted.cycles.items():
            timing.setdefault(port, list(cycles))
    return Scenario(
        name=scenario.name, stimulus=scenario.stimulus,
        expected={port: [encode(port, item) for item in items] for port, items in scenario.expected.items()},
        valid=scenario.valid, ready=scenario.ready, timing=timing)


async def run_table(bench, module, golden_cycles=True, after_scenario=None):
    """Run every scenario of a block's table (``verif/scenarios/<block>.py``) on the RTL, in order.

    Each scenario starts from an idle block (the previous one has drained),
    and the RTL is reset between scenarios. Payloads are compared as bits
    packed through the port's own layout. Where the table's ``golden`` returns
    cycles (a golden cycle model), the RTL's output cycles must equal them.
    ``after_scenario``, an async callable, is awaited with each scenario once
    its transactions are checked, before the reset (a testbench's own checks).
    """
    _, sources, sinks, encode = _stream_drivers(bench)
    for index, scenario in enumerate(module.scenarios(bench.params, bench.seed)):
        in_bits = _in_bits(bench, module, scenario, encode, golden_cycles)
        if index:
            await bench.reset()
        await run_on_rtl(bench, in_bits, sources, sinks, decode=lambda port, bits: int(bits), encode=encode)
        if after_scenario is not None:
            await after_scenario(scenario)


def table_test(table, doc):
    """The cocotb test that runs a block's whole table on the RTL (:func:`run_table`), with ``doc`` as its docstring.

    A testbench says ``scenario_table = table_test(table, "...")`` instead of writing the test out.
    """
    import sys

    import cocotb

    from tbutil import start

    async def scenario_table(dut):
        bench = await start(dut)
        await run_table(bench, table)

    # Reported as the calling testbench's own test (tb_x.scenario_table), as if written there.
    scenario_table.__doc__ = doc
    scenario_table.__qualname__ = "scenario_table"
    scenario_table.__module__ = sys._getframe(1).f_globals["__name__"]
    return cocotb.test()(scenario_table)
