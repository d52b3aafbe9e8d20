"""cocotb testbench of ``nt_bus``: its scenario table (``verif/scenarios/nt_bus.py``), arbitration rules, reset.

The bus's REQ, mask and grant are not streams, so this testbench drives the table itself. One
driver loop sets REQ (held from the request cycle until the PE's last word is accepted) and the
mask after every rising edge, and checks the arbitration rules in every cycle (grant one-hot,
given only to the lowest-index REQ in a cycle without broadcast, held until the holder's
END-MARK, no merge transfer while the common vault offers a word). The delivered words, the
merged words (in bus order, or per PE under backpressure), the grants and, without
backpressure, every output cycle (the table's and the golden model's) are then compared with
the scenario.
"""
import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.cocotb_streams import StreamSink, StreamSource, check_no_ready_path, pack, stream_ports, unpack

import scenarios.nt_bus as table
from scenario import Transactions, check_transactions
from regression import regression_test
from tbutil import start


class Harness:
    """Stream drivers on every port of the bus, kept for the whole test (they survive resets)."""

    def __init__(self, bench):
        self.bench = bench
        dut, cycle, rng = bench.dut, bench.cycle, bench.rng
        self.pes = bench.component.pes
        self.sources = {"i_broadcast": StreamSource(dut, "i_broadcast", cycle, rng)}
        self.sources.update({f"i_merge__{pe}": StreamSource(dut, f"i_merge__{pe}", cycle, rng)
                             for pe in range(self.pes)})
        self.sinks = {"o_merge": StreamSink(dut, "o_merge", cycle, rng)}
        self.sinks.update({f"o_broadcast__{pe}": StreamSink(dut, f"o_broadcast__{pe}", cycle, rng)
                           for pe in range(self.pes)})
        self.merge_valid = [getattr(dut, f"i_merge__{pe}__valid") for pe in range(self.pes)]
        self.merge_ready = [getattr(dut, f"i_merge__{pe}__ready") for pe in range(self.pes)]
        self.merge_payload = [getattr(dut, f"i_merge__{pe}__payload") for pe in range(self.pes)]
        dut.merge_request.value = 0
        dut.broadcast_mask.value = 0

    def handshakes(self, scenario):
        """Valid and ready patterns of the scenario (always valid / ready where it names none)."""
        for port, source in self.sources.items():
            source.follow(scenario.valid.get(port, (1,)))
        for port, sink in self.sinks.items():
            sink.follow(scenario.ready.get(port, (1,)))

    def drop(self):
        for source in self.sources.values():
            source.drop()
        self.bench.dut.merge_request.value = 0


class Run:
    """What one scenario produced: transfers since its start, in scenario cycles (0 = first offer)."""

    def __init__(self, harness, origin):
        self.origin = origin
        self.sent = {port: len(source.sent) for port, source in harness.sources.items()}
        self.received = {port: len(sink.received) for port, sink in harness.sinks.items()}
        self.grants = []

    def transfers(self, harness, port):
        """``(cycle, payload)`` of the port's transfers in this run, cycles counted from its origin."""
        if port in harness.sources:
            records = harness.sources[port].sent[self.sent[port]:]
        else:
            records = harness.sinks[port].received[self.received[port]:]
        return [(cycle - self.origin, payload) for cycle, payload in records]


async def drive(harness, scenario, label, stop_after=None):
    """Play ``scenario``, checking the arbitration every cycle; returns the :class:`Run` when all words are out.

    With ``stop_after``, stops after that many cycles instead (for a reset mid-stream).
    """
    bench, dut = harness.bench, harness.bench.dut
    layout = bench.component.word_layout
    stimulus = scenario.stimulus
    broadcast_start = stimulus["broadcast_start"][0]
    trace = stimulus["broadcast_mask"]
    request_cycle = stimulus["merge_request"]
    totals = [len(stimulus[f"i_merge__{pe}"]) for pe in range(harness.pes)]
    await RisingEdge(dut.clk)
    await ReadOnly()
    run = Run(harness, bench.cycle.now + 1)
    harness.handshakes(scenario)
    for pe in range(harness.pes):
        harness.sources[f"i_merge__{pe}"].send([pack(layout, word) for word in stimulus[f"i_merge__{pe}"]])
    broadcast_words = [pack(layout, word) for word in stimulus["i_broadcast"]]
    if broadcast_start == 0:
        harness.sources["i_broadcast"].send(broadcast_words)
    wanted = {port: len(items) for port, items in scenario.expected.items() if port.startswith("o_broadcast")}
    wanted["o_merge"] = sum(totals)
    timeout = 40 * (len(broadcast_words) + sum(totals)) + 40 * max(request_cycle, default=0) + 400
    previous = None
    for cycle in range(timeout):
        await RisingEdge(dut.clk)
        sent = [len(harness.sources[f"i_merge__{pe}"].sent) - run.sent[f"i_merge__{pe}"] for pe in range(harness.pes)]
        request = sum(1 << pe for pe in range(harness.pes) if cycle >= request_cycle[pe] and sent[pe] < totals[pe])
        dut.merge_request.value = request
        dut.broadcast_mask.value = trace[min(cycle, len(trace) - 1)]
        await ReadOnly()
        now = observe(harness, request)
        check_arbitration(bench, previous, now, cycle, label)
        if now["grant"] and not (previous and previous["grant"]):
            run.grants.append((now["grant"].bit_length() - 1, cycle))
        previous = now
        if cycle + 1 == broadcast_start:
            harness.sources["i_broadcast"].send(broadcast_words)
        finished = cycle >= broadcast_start and all(source.idle for source in harness.sources.values()) and all(
            len(harness.sinks[port].received) - run.received[port] >= count for port, count in wanted.items())
        if (stop_after is not None and cycle + 1 >= stop_after) or finished:
            await RisingEdge(dut.clk)
            dut.merge_request.value = 0
            return run
    raise AssertionError(f"{label}: words still missing after {timeout} cycles {bench.where()}")


def observe(harness, request):
    dut = harness.bench.dut
    transfers = [pe for pe in range(harness.pes)
                 if harness.merge_valid[pe].value == 1 and harness.merge_ready[pe].value == 1]
    layout = harness.bench.component.word_layout
    return {
        "grant": int(dut.merge_grant.value),
        "request": request,
        "broadcasting": int(dut.i_broadcast__valid.value),
        "merge_transfers": transfers,
        "end_mark": any(unpack(layout, harness.merge_payload[pe].value).end for pe in transfers),
    }


def check_arbitration(bench, previous, now, cycle, label):
    where = f"{label}, cycle {cycle} {bench.where()}"
    grant = now["grant"]
    assert grant & (grant - 1) == 0, f"merge_grant {grant:#x} is not one-hot or zero ({where})"
    assert not (now["broadcasting"] and now["merge_transfers"]), \
        f"merge transfer from PE {now['merge_transfers']} while the common vault offers a word ({where})"
    assert all(grant >> pe & 1 for pe in now["merge_transfers"]), \
        f"merge transfer from PE {now['merge_transfers']} without grant {grant:#x} ({where})"
    if previous is None:
        return
    held = previous["grant"]
    if held:
        expected = 0 if (previous["merge_transfers"] and previous["end_mark"]) else held
        assert grant == expected, (f"grant {held:#x} should become {expected:#x} (END-MARK accepted: "
                                   f"{previous['end_mark']}), got {grant:#x} ({where})")
    else:
        arbitrate = previous["request"] and not previous["broadcasting"]
        expected = previous["request"] & -previous["request"] if arbitrate else 0
        assert grant == expected, (f"after REQ {previous['request']:#x} with broadcast valid "
                                   f"{previous['broadcasting']}: expected grant {expected:#x}, got {grant:#x} ({where})")


def outcome(harness, run):
    """The run as :class:`Transactions` in the table's terms: items (words as dicts) and output cycles."""
    component = harness.bench.component
    items, cycles = {}, {}
    for pe in range(harness.pes):
        port = f"o_broadcast__{pe}"
        transfers = run.transfers(harness, port)
        items[port] = [{"data": int(word.data), "end": int(word.end)}
                       for word in (unpack(component.word_layout, payload) for _, payload in transfers)]
        cycles[port] = [cycle for cycle, _ in transfers]
    transfers = run.transfers(harness, "o_merge")
    merged = [unpack(component.merge_layout, payload) for _, payload in transfers]
    items["o_merge"] = [{"data": int(word.data), "end": int(word.end), "source": int(word.source)} for word in merged]
    cycles["o_merge"] = [cycle for cycle, _ in transfers]
    for pe in range(harness.pes):
        items[f"o_merge from {pe}"] = [{"data": word["data"], "end": word["end"]}
                                       for word in items["o_merge"] if word["source"] == pe]
    items["grants"] = run.grants
    return Transactions(items, cycles)


def check_bursts_not_interleaved(harness, actual, label):
    holder = None
    for position, word in enumerate(actual.items["o_merge"]):
        assert holder in (None, word["source"]), (f"{label}: merged word {position} from PE {word['source']} inside "
                                                  f"a burst of PE {holder} {harness.bench.where()}")
        holder = None if word["end"] else word["source"]


async def play(harness, scenario):
    """Run one table scenario and check it against the table and, without backpressure, the golden cycles."""
    bench = harness.bench
    run = await drive(harness, scenario, scenario.name)
    for _ in range(table._LATENCY + 2):
        await RisingEdge(bench.dut.clk)
    actual = outcome(harness, run)
    check_bursts_not_interleaved(harness, actual, scenario.name)
    check_transactions(scenario, actual, bench.where())
    predicted = table.golden(bench.params, scenario)
    for port, cycles in predicted.cycles.items():
        assert actual.cycles[port] == cycles, (f"{scenario.name}: {port} cycles: golden model {cycles}, "
                                               f"RTL {actual.cycles[port]} {bench.where()}")
    bench.dut._log.info("%s: %d merged words in %d bursts, %d cycles, checked", scenario.name,
                        len(actual.items["o_merge"]), len(run.grants), bench.cycle.now - run.origin)


class RegressionHarness:
    """The bus's :class:`Harness` as ``regression.run_regression`` wants it: every scenario through :func:`play`."""

    def __init__(self, bench):
        self.harness = Harness(bench)
        self.sources, self.sinks = self.harness.sources, self.harness.sinks
        self.traffic = None

    async def play(self, scenario):
        await play(self.harness, scenario)

    async def start(self, scenario):
        self.traffic = cocotb.start_soon(drive(self.harness, scenario, "before reset", stop_after=1 << 30))

    def drop(self):
        if self.traffic is not None and not self.traffic.done():
            self.traffic.kill()
        self.traffic = None
        self.harness.drop()


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/nt_bus.py``, the arbitration rules checked in every cycle."""
    bench = await start(dut)
    harness = Harness(bench)
    for index, scenario in enumerate(table.scenarios(bench.params, bench.seed)):
        if index:
            await bench.reset()
        await play(harness, scenario)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of broadcast and merge traffic leaves an idle bus: no word, no grant."""
    bench = await start(dut)
    harness = Harness(bench)
    pes = harness.pes
    scenarios = table.scenarios(bench.params, bench.seed + 3)
    busy = next(s for s in scenarios if s.valid)
    busy = type(busy)(busy.name, dict(busy.stimulus, merge_request=[0] * pes, broadcast_start=[3]), busy.expected,
                      valid=busy.valid, ready=busy.ready)
    await drive(harness, busy, "before reset", stop_after=bench.rng.randrange(8, 40))
    harness.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    await ReadOnly()
    idle = [dut.merge_grant.value, dut.o_merge__valid.value,
            *(getattr(dut, f"o_broadcast__{pe}__valid").value for pe in range(pes))]
    assert all(int(value) == 0 for value in idle), \
        f"after reset: grant and output valids {[int(v) for v in idle]}, expected all 0 {bench.where()}"
    await play(harness, scenarios[0])


@cocotb.test()
async def no_combinational_ready_path(dut):
    """No input's ``ready`` follows an output's ``ready`` within a cycle (the outputs are StreamStages)."""
    bench = await start(dut)
    await check_no_ready_path(bench)
    await bench.reset()
    # Again with every REQ up (so merge words are granted), few broadcast words (so they flow), and
    # outputs ready one cycle in seven (so they fill up).
    pes = bench.component.pes
    inputs, _ = stream_ports(bench)
    assert {"i_broadcast", "i_merge__0"} <= set(inputs), f"stream ports not found: {inputs} {bench.where()}"

    def masks(cycle):
        dut.merge_request.value = (1 << pes) - 1
        dut.broadcast_mask.value = bench.rng.getrandbits(pes)

    await check_no_ready_path(bench, cycles=60, ready_period=7, before_each_cycle=masks,
                              valid_probability={name: 0.2 if name == "i_broadcast" else 0.8 for name in inputs})
    dut.merge_request.value = 0


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream,
# the arbitration rules checked in every cycle (play).
random_regression = regression_test(table, harness=RegressionHarness)
