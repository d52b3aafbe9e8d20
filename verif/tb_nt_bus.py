"""cocotb testbench of ``nt_bus`` against :func:`trainforge.golden.neurotrainer.bus.nt_bus`.

A scenario is a broadcast stream from the common vault (offered from ``broadcast_start``), a
``broadcast_mask`` value per cycle, and for each PE a merge stream of bursts closed by
END-MARKs with the cycle its REQ rises. One driver loop sets REQ (held from the request
cycle until the PE's last word is accepted) and the mask after every rising edge, and checks
the arbitration rules in every cycle (grant one-hot, given only to the lowest-index REQ in a
cycle without broadcast, held until the holder's END-MARK, no merge transfer while the common
vault offers a word). With backpressure the delivered words are checked against the mask in
force when each broadcast word was accepted and the merged bursts for order and
non-interleaving; without backpressure every word, grant and cycle is compared with the golden
model.
"""
import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from trainforge.golden.neurotrainer.bus import LATENCY, nt_bus

from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack
from tbutil import start


class Scenario:
    """Stimulus of one run: broadcast words, the mask trace, and each PE's merge bursts with its REQ cycle."""

    def __init__(self, broadcast_data, broadcast_end, broadcast_start, mask_trace, merge_data, merge_end,
                 request_cycle):
        self.broadcast_data = np.asarray(broadcast_data, dtype=np.int64)
        self.broadcast_end = np.asarray(broadcast_end, dtype=bool)
        self.broadcast_start = int(broadcast_start)
        self.mask_trace = np.atleast_1d(np.asarray(mask_trace, dtype=np.int64))
        self.merge_data = [np.asarray(words, dtype=np.int64) for words in merge_data]
        self.merge_end = [np.asarray(ends, dtype=bool) for ends in merge_end]
        self.request_cycle = np.asarray(request_cycle, dtype=np.int64)

    def mask(self, cycle):
        return int(self.mask_trace[min(cycle, len(self.mask_trace) - 1)])


def bursts(generator, width, count, length, marker_probability=0.1):
    """``count`` bursts of 1..length random words, each closed by an END-MARK word (data all ones, end = 1).

    Some plain words also carry the all-ones data (end = 0): only the flag makes an END-MARK.
    """
    ones = (1 << width) - 1
    data, end = [], []
    for _ in range(count):
        size = int(generator.integers(1, length + 1))
        words = generator.integers(0, 1 << width, size=size, dtype=np.int64)
        words[generator.random(size) < marker_probability] = ones
        data.extend([*words[:-1], ones])
        end.extend([False] * (size - 1) + [True])
    return np.array(data, dtype=np.int64), np.array(end, dtype=bool)


def random_scenario(generator, pes, width, broadcast_words=40, burst_length=10, max_bursts=3):
    broadcast_data = generator.integers(0, 1 << width, size=broadcast_words, dtype=np.int64)
    broadcast_end = generator.random(broadcast_words) < 0.1
    merges = [bursts(generator, width, int(generator.integers(0, max_bursts + 1)), burst_length) for _ in range(pes)]
    span = broadcast_words + sum(len(data) for data, _ in merges) + 20
    return Scenario(
        broadcast_data, broadcast_end, int(generator.integers(0, 30)),
        generator.integers(0, 1 << pes, size=span),
        [data for data, _ in merges], [end for _, end in merges],
        generator.integers(0, 30, size=pes),
    )


class Harness:
    """Stream drivers on every port of the bus, kept for the whole test (they survive resets)."""

    def __init__(self, bench):
        self.bench = bench
        dut, cycle, rng = bench.dut, bench.cycle, bench.rng
        self.pes = bench.component.pes
        self.broadcast = StreamSource(dut, "i_broadcast", cycle, rng)
        self.merge = [StreamSource(dut, f"i_merge__{pe}", cycle, rng) for pe in range(self.pes)]
        self.delivered = [StreamSink(dut, f"o_broadcast__{pe}", cycle, rng) for pe in range(self.pes)]
        self.merged = StreamSink(dut, "o_merge", cycle, rng)
        self.merge_valid = [getattr(dut, f"i_merge__{pe}__valid") for pe in range(self.pes)]
        self.merge_ready = [getattr(dut, f"i_merge__{pe}__ready") for pe in range(self.pes)]
        self.merge_payload = [getattr(dut, f"i_merge__{pe}__payload") for pe in range(self.pes)]
        dut.merge_request.value = 0
        dut.broadcast_mask.value = 0

    def backpressure(self, valid_probability, ready_probability):
        for source in (self.broadcast, *self.merge):
            source.valid_probability = valid_probability
        for sink in (*self.delivered, self.merged):
            sink.ready_probability = ready_probability

    def drop(self):
        for source in (self.broadcast, *self.merge):
            source.drop()
        self.bench.dut.merge_request.value = 0


class Run:
    """What one scenario produced: transfers since its start, in scenario cycles (0 = first offer)."""

    def __init__(self, harness, origin):
        self.origin = origin
        self.broadcast_sent = len(harness.broadcast.sent)
        self.merge_sent = [len(source.sent) for source in harness.merge]
        self.delivered = [len(sink.received) for sink in harness.delivered]
        self.merged = len(harness.merged.received)
        self.grants = []


async def drive(harness, scenario, label, stop_after=None):
    """Play ``scenario``, checking the arbitration every cycle; returns the :class:`Run` when all words are out.

    With ``stop_after``, stops after that many cycles instead (for a reset mid-stream).
    """
    bench, dut = harness.bench, harness.bench.dut
    layout = bench.component.word_layout
    totals = [len(words) for words in scenario.merge_data]
    await RisingEdge(dut.clk)
    await ReadOnly()
    run = Run(harness, bench.cycle.now + 1)
    for pe in range(harness.pes):
        harness.merge[pe].send([pack(layout, {"data": int(d), "end": int(e)})
                                for d, e in zip(scenario.merge_data[pe], scenario.merge_end[pe])])
    broadcast_words = [pack(layout, {"data": int(d), "end": int(e)})
                       for d, e in zip(scenario.broadcast_data, scenario.broadcast_end)]
    if scenario.broadcast_start == 0:
        harness.broadcast.send(broadcast_words)
    timeout = 40 * (len(broadcast_words) + sum(totals)) + 40 * int(scenario.request_cycle.max(initial=0)) + 400
    previous = None
    for cycle in range(timeout):
        await RisingEdge(dut.clk)
        sent = [len(source.sent) - before for source, before in zip(harness.merge, run.merge_sent)]
        request = sum(1 << pe for pe in range(harness.pes)
                      if cycle >= scenario.request_cycle[pe] and sent[pe] < totals[pe])
        dut.merge_request.value = request
        dut.broadcast_mask.value = scenario.mask(cycle)
        await ReadOnly()
        now = observe(harness, request)
        check_arbitration(bench, previous, now, cycle, label)
        if now["grant"] and not (previous and previous["grant"]):
            run.grants.append((now["grant"].bit_length() - 1, cycle))
        previous = now
        if cycle + 1 == scenario.broadcast_start:
            harness.broadcast.send(broadcast_words)
        if (stop_after is not None and cycle + 1 >= stop_after) or \
                (cycle >= scenario.broadcast_start and finished(harness, scenario, run)):
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


def accepted_masks(harness, scenario, run):
    """Broadcast words each PE must receive, from the mask in force at each accepted word (None until all are accepted)."""
    accepted = [cycle - run.origin for cycle, _ in harness.broadcast.sent[run.broadcast_sent:]]
    if len(accepted) < len(scenario.broadcast_data):
        return None
    masks = np.array([scenario.mask(cycle) for cycle in accepted], dtype=np.int64)
    return masks


def finished(harness, scenario, run):
    masks = accepted_masks(harness, scenario, run)
    if masks is None or not all(source.idle for source in harness.merge):
        return False
    for pe, sink in enumerate(harness.delivered):
        if len(sink.received) - run.delivered[pe] < int(((masks >> pe) & 1).sum()):
            return False
    return len(harness.merged.received) - run.merged >= sum(len(words) for words in scenario.merge_data)


def check_words(harness, scenario, run, label, exact_cycles):
    """Every PE's broadcast words and the merged bursts; with ``exact_cycles`` also every cycle (golden model)."""
    bench = harness.bench
    component = bench.component
    where = f"{label} {bench.where()}"
    masks = accepted_masks(harness, scenario, run)
    for pe, sink in enumerate(harness.delivered):
        received = sink.received[run.delivered[pe]:]
        words = [unpack(component.word_layout, payload) for _, payload in received]
        mine = (masks >> pe) & 1 == 1
        expected = list(zip(scenario.broadcast_data[mine].tolist(), scenario.broadcast_end[mine].tolist()))
        actual = [(int(word.data), bool(word.end)) for word in words]
        assert actual == expected, f"PE {pe} broadcast words: expected {expected}, got {actual} ({where})"
    merged = [(cycle - run.origin, unpack(component.merge_layout, payload))
              for cycle, payload in harness.merged.received[run.merged:]]
    per_source = [[] for _ in range(harness.pes)]
    holder = None
    for position, (_, word) in enumerate(merged):
        source = int(word.source)
        assert holder in (None, source), (f"merged word {position} from PE {source} inside a burst of PE "
                                          f"{holder} ({where})")
        holder = None if word.end else source
        per_source[source].append((int(word.data), bool(word.end)))
    for pe in range(harness.pes):
        expected = list(zip(scenario.merge_data[pe].tolist(), scenario.merge_end[pe].tolist()))
        assert per_source[pe] == expected, f"PE {pe} merged words: expected {expected}, got {per_source[pe]} ({where})"
    if not exact_cycles:
        return
    golden = nt_bus(scenario.broadcast_data, scenario.broadcast_end, scenario.merge_data, scenario.merge_end,
                    broadcast_start=scenario.broadcast_start, broadcast_mask=scenario.mask_trace,
                    request_cycle=scenario.request_cycle, **bench.params)
    for pe, sink in enumerate(harness.delivered):
        cycles = [cycle - run.origin for cycle, _ in sink.received[run.delivered[pe]:]]
        expected = golden["broadcast"][pe]["cycles"].tolist()
        assert cycles == expected, f"PE {pe} broadcast cycles: expected {expected}, got {cycles} ({where})"
    actual = [(int(word.source), int(word.data), bool(word.end), cycle) for cycle, word in merged]
    expected = list(zip(golden["merge"]["source"].tolist(), golden["merge"]["data"].tolist(),
                        golden["merge"]["end"].tolist(), golden["merge"]["cycles"].tolist()))
    assert actual == expected, f"merged (source, data, end, cycle): expected {expected}, got {actual} ({where})"
    assert run.grants == golden["grant_cycles"], \
        f"grants (PE, first cycle): expected {golden['grant_cycles']}, got {run.grants} ({where})"


async def play(harness, scenario, label, exact_cycles=False):
    run = await drive(harness, scenario, label)
    for _ in range(LATENCY + 2):
        await RisingEdge(harness.bench.dut.clk)
    check_words(harness, scenario, run, label, exact_cycles)
    harness.bench.dut._log.info("%s: %d broadcast words, %d merged words in %d bursts, %d cycles, checked",
                                label, len(scenario.broadcast_data), sum(map(len, scenario.merge_data)),
                                len(run.grants), harness.bench.cycle.now - run.origin)


def all_pes(pes):
    return (1 << pes) - 1


@cocotb.test()
async def random_traffic_with_backpressure(dut):
    """Random broadcast, masks, merge bursts and REQ cycles; random valid gaps and ready on every stream."""
    bench = await start(dut)
    harness = Harness(bench)
    harness.backpressure(valid_probability=0.6, ready_probability=0.6)
    generator = np.random.default_rng(bench.seed)
    for session in range(3):
        scenario = random_scenario(generator, harness.pes, bench.component.width)
        await play(harness, scenario, f"backpressure session {session}")


@cocotb.test()
async def exact_cycles_without_backpressure(dut):
    """Every word, grant and output cycle equals the golden model when nothing stalls."""
    bench = await start(dut)
    harness = Harness(bench)
    generator = np.random.default_rng(bench.seed + 1)
    for session in range(3):
        scenario = random_scenario(generator, harness.pes, bench.component.width)
        await play(harness, scenario, f"no backpressure session {session}", exact_cycles=True)


@cocotb.test()
async def broadcast_wins_over_simultaneous_merge_requests(dut):
    """Broadcast and every PE's REQ in the same cycle: the broadcast goes first, then the PEs in index order."""
    bench = await start(dut)
    harness = Harness(bench)
    pes, width = harness.pes, bench.component.width
    generator = np.random.default_rng(bench.seed + 2)
    merges = [bursts(generator, width, 1, 5) for _ in range(pes)]
    scenario = Scenario(generator.integers(0, 1 << width, size=12), np.r_[np.zeros(11, bool), True], 0,
                        all_pes(pes), [d for d, _ in merges], [e for _, e in merges], np.zeros(pes))
    await play(harness, scenario, "broadcast and merge together", exact_cycles=True)
    harness.backpressure(valid_probability=0.7, ready_probability=0.5)
    await play(harness, scenario, "broadcast and merge together with backpressure")


@cocotb.test()
async def merge_priority_and_end_marks(dut):
    """All PEs request at once (served lowest index first); END-MARK releases; all-ones data without the flag does not."""
    bench = await start(dut)
    harness = Harness(bench)
    pes, width = harness.pes, bench.component.width
    ones = (1 << width) - 1
    # PE 0 sends all-ones plain words (they must not release the grant), PE 1 two bursts, the last PE zeros.
    def words(pe):
        if pe == 0:
            return np.full(6, ones), np.r_[np.zeros(5, bool), True]
        if pe == 1:
            return np.arange(1, 8), np.array([0, 0, 1, 0, 0, 0, 1], bool)
        if pe == pes - 1:
            return np.zeros(4), np.r_[np.zeros(3, bool), True]
        return np.full(3, pe), np.array([0, 0, 1], bool)
    merge_data, merge_end = zip(*(words(pe) for pe in range(pes)))
    empty = np.zeros(0, dtype=np.int64)
    scenario = Scenario(empty, empty.astype(bool), 0, 0, merge_data, merge_end, np.zeros(pes))
    await play(harness, scenario, "all PEs request together", exact_cycles=True)
    # A higher PE requests first and keeps the bus until its END-MARK although PE 0 asks meanwhile.
    late = Scenario(empty, empty.astype(bool), 0, 0, merge_data, merge_end, np.r_[5, np.zeros(pes - 1)])
    await play(harness, late, "PE 0 requests during another burst", exact_cycles=True)
    harness.backpressure(valid_probability=0.6, ready_probability=0.4)
    await play(harness, scenario, "all PEs request together with backpressure")


@cocotb.test()
async def broadcast_corner_cases(dut):
    """All-zero and all-ones words; masks of no PE, one PE and every PE; a broadcast in the middle of a burst."""
    bench = await start(dut)
    harness = Harness(bench)
    pes, width = harness.pes, bench.component.width
    ones = (1 << width) - 1
    data = np.r_[np.zeros(6), np.full(6, ones), np.arange(6)].astype(np.int64)
    end = np.zeros(18, bool)
    end[[5, 17]] = True
    masks = np.r_[np.zeros(4), np.full(4, all_pes(pes)), np.full(4, 1 << (pes - 1)), np.full(30, all_pes(pes))]
    long_burst = np.arange(100, 130)
    merge_data = [long_burst] + [np.zeros(0, np.int64)] * (pes - 1)
    merge_end = [np.r_[np.zeros(29, bool), True]] + [np.zeros(0, bool)] * (pes - 1)
    scenario = Scenario(data, end, 10, masks.astype(np.int64), merge_data, merge_end, np.zeros(pes))
    await play(harness, scenario, "broadcast corner cases", exact_cycles=True)
    harness.backpressure(valid_probability=0.5, ready_probability=0.5)
    await play(harness, scenario, "broadcast corner cases with backpressure")


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of broadcast and merge traffic leaves an idle bus: no word, no grant."""
    bench = await start(dut)
    harness = Harness(bench)
    generator = np.random.default_rng(bench.seed + 3)
    pes, width = harness.pes, bench.component.width
    harness.backpressure(valid_probability=0.7, ready_probability=0.5)
    busy = random_scenario(generator, pes, width)
    busy.request_cycle[:] = 0
    busy.broadcast_start = 3
    await drive(harness, busy, "before reset", stop_after=bench.rng.randrange(8, 40))
    harness.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    await ReadOnly()
    idle = [dut.merge_grant.value, dut.o_merge__valid.value,
            *(getattr(dut, f"o_broadcast__{pe}__valid").value for pe in range(pes))]
    assert all(int(value) == 0 for value in idle), \
        f"after reset: grant and output valids {[int(v) for v in idle]}, expected all 0 {bench.where()}"
    harness.backpressure(valid_probability=1.0, ready_probability=1.0)
    await play(harness, random_scenario(generator, pes, width), "after reset", exact_cycles=True)
