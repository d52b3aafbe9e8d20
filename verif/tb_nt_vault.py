"""cocotb testbench of ``nt_vault``: its scenario table, and a reset mid-stream against the golden model."""
import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.golden.neurotrainer.vault import nt_vault
from trainforge.cocotb_streams import StreamSink, StreamSource, pack

import scenarios.nt_vault as table
from scenario import table_test
from regression import regression_test
from tbutil import start


def random_requests(bench, generator, count):
    """Writes every word the session reads first (the memory survives reset and earlier tests), then a random mix.

    Addresses use the full 32 bits (they wrap modulo ``depth``); a narrow set of words gives
    read-after-write on the same word, sometimes back to back.
    """
    depth = bench.component.depth
    words = generator.choice(depth, size=min(depth, 6), replace=False)
    address = np.concatenate([words, generator.choice(words, size=count)])
    address = address + generator.integers(0, (1 << 32) // depth, size=len(address)) * depth
    write = np.concatenate([np.ones(len(words), dtype=bool), generator.random(count) < 0.4])
    data = generator.integers(0, 1 << 32, size=len(address))
    return address & 0xFFFFFFFF, write, data


def attach(bench, valid_probability, ready_probability):
    return (StreamSource(bench.dut, "i_request", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_data", bench.cycle, bench.rng, ready_probability))


async def run_and_check(bench, source, sink, requests, label, expect_cycles=False):
    expected = nt_vault(*requests, **bench.params)
    layout = bench.component.request_layout
    before, sent_before = len(sink.received), len(source.sent)
    source.send([pack(layout, {"address": int(a), "write": int(w), "data": int(d)}) for a, w, d in zip(*requests)])
    count = len(expected["data"])
    await bench.wait_until(lambda: source.idle and len(sink.received) >= before + count,
                           timeout=(bench.component.interval + 4) * 8 * len(requests[0]) + 200,
                           what=f"{count} read data ({label})")
    for _ in range(bench.component.latency + 4):
        await RisingEdge(bench.dut.clk)
    received = sink.received[before:]
    actual = np.array([payload for _, payload in received], dtype=np.uint64)
    assert len(actual) == count, f"{label}: expected {count} read data, got {len(actual)} {bench.where()}"
    bad = np.flatnonzero(actual != expected["data"])
    assert bad.size == 0, (f"{label}: read {bad[0]} expected {int(expected['data'][bad[0]]):#010x}, "
                           f"got {int(actual[bad[0]]):#010x} ({bad.size} mismatches) {bench.where()}")
    if expect_cycles:
        start_cycle = source.sent[sent_before][0]
        accepted = np.array([cycle for cycle, _ in source.sent[sent_before:]]) - start_cycle
        wrong = np.flatnonzero(accepted != np.arange(len(accepted)) * bench.component.interval)
        assert wrong.size == 0, (f"{label}: request {wrong[0]} expected accepted at cycle "
                                 f"{wrong[0] * bench.component.interval}, got {accepted[wrong[0]]} {bench.where()}")
        cycles = np.array([cycle for cycle, _ in received]) - start_cycle
        late = np.flatnonzero(cycles != expected["cycles"])
        assert late.size == 0, (f"{label}: read {late[0]} expected at cycle {expected['cycles'][late[0]]}, "
                                f"got {cycles[late[0]]} {bench.where()}")


@cocotb.test()
async def power_on_contents_are_zero(dut):
    """Before any write, every word reads 0 (the golden model's default contents).

    It must be the module's first test: the memory keeps what later tests write, even across resets.
    """
    bench = await start(dut)
    depth = bench.component.depth
    source, sink = attach(bench, valid_probability=1.0, ready_probability=1.0)
    layout = bench.component.request_layout
    source.send([pack(layout, {"address": word, "write": 0, "data": 0}) for word in range(depth)])
    await bench.wait_until(lambda: source.idle and len(sink.received) >= depth,
                           timeout=(bench.component.interval + 4) * depth + 200, what=f"{depth} power-on reads")
    got = [payload for _, payload in sink.received]
    nonzero = [(word, value) for word, value in enumerate(got) if value != 0]
    assert len(got) == depth and not nonzero, (f"power-on contents: expected {depth} zero words, got {len(got)} "
                                               f"words, nonzero (word, value): {nonzero[:4]} {bench.where()}")


scenario_table = table_test(table, (
    "Every scenario of ``verif/scenarios/nt_vault.py``: read data in order; full rate: data on the golden "
    "model's cycles."
))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset drops the reads in flight; the memory keeps its contents (it is not cleared)."""
    bench = await start(dut)
    generator = np.random.default_rng(bench.seed + 2)
    source, sink = attach(bench, valid_probability=0.7, ready_probability=0.5)
    layout = bench.component.request_layout
    source.send([pack(layout, {"address": int(a), "write": int(w), "data": int(d)})
                 for a, w, d in zip(*random_requests(bench, generator, 100))])
    for _ in range(bench.rng.randrange(5, 80)):
        await RisingEdge(dut.clk)
    source.drop()
    await bench.reset(cycles=2)
    await RisingEdge(dut.clk)
    assert dut.o_data__valid.value == 0, f"o_data still valid after reset {bench.where()}"
    await run_and_check(bench, source, sink, random_requests(bench, generator, 150), "after reset")


# make regress TRANSACTIONS=N: passes of the table with fresh seeds, backpressure and resets mid-stream.
random_regression = regression_test(table)
