"""cocotb testbench of ``td_scheduler`` against :func:`trainforge.golden.tensordash.scheduler.schedule`."""
import cocotb
import numpy as np

from trainforge.golden.tensordash.scheduler import schedule

from streams import StreamSink, StreamSource, pack, unpack
from scenario import run_table
import scenarios.td_scheduler as table
from tbutil import start


def candidate_vectors(bench, count):
    """Random Z at densities from 0.01% to 100%, random visible rows, then directed corner vectors."""
    generator = np.random.default_rng(bench.seed)
    depth, lanes = bench.component.depth, bench.component.lanes
    density = generator.choice([0.0001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], size=count)
    z = generator.random((count, depth, lanes)) < density[:, None, None]
    visible = generator.random((count, depth)) < 0.85
    corners_z = [np.zeros((depth, lanes), bool), np.ones((depth, lanes), bool)]
    one_lane = np.zeros((depth, lanes), bool)
    one_lane[:, 0] = True
    alternating = np.zeros((depth, lanes), bool)
    alternating[::2] = True
    corners_z += [one_lane, alternating]
    z = np.concatenate([np.array(corners_z), z])
    visible = np.concatenate([np.ones((len(corners_z), depth), bool), visible])
    return z, visible


def encode(bench, z, visible):
    layout = bench.component.candidate_layout
    return [pack(layout, {"candidates": [int(sum(int(bit) << lane for lane, bit in enumerate(row))) for row in z[k]],
                          "visible": int(sum(int(bit) << d for d, bit in enumerate(visible[k])))})
            for k in range(len(z))]


async def run_vectors(bench, valid_probability, ready_probability, count):
    component = bench.component
    z, visible = candidate_vectors(bench, count)
    expected = schedule(z, component.pattern, visible, levels=component.levels)
    source = StreamSource(bench.dut, "i_candidates", bench.cycle, bench.rng, valid_probability)
    sink = StreamSink(bench.dut, "o_schedule", bench.cycle, bench.rng, ready_probability)
    source.send(encode(bench, z, visible))
    await bench.wait_until(lambda: len(sink.received) >= len(z), timeout=20 * len(z) + 100, what="schedules")
    assert len(sink.received) == len(z), f"expected {len(z)} schedules, got {len(sink.received)} {bench.where()}"
    for k, (_, bits) in enumerate(sink.received):
        got = unpack(component.schedule_layout, bits)
        ms = [int(got.ms[lane]) for lane in range(component.lanes)]
        active = [bool(int(got.active) >> lane & 1) for lane in range(component.lanes)]
        chosen = [[bool(int(got.chosen[d]) >> lane & 1) for lane in range(component.lanes)]
                  for d in range(component.depth)]
        what = f"vector {k} Z={z[k].astype(int).tolist()} visible={visible[k].astype(int).tolist()}"
        assert ms == expected.ms[k].tolist(), f"{what}: MS expected {expected.ms[k].tolist()} got {ms} {bench.where()}"
        assert active == expected.active[k].tolist(), \
            f"{what}: active expected {expected.active[k].tolist()} got {active} {bench.where()}"
        assert chosen == expected.chosen[k].tolist(), \
            f"{what}: chosen expected {expected.chosen[k].astype(int).tolist()} got {chosen} {bench.where()}"
        assert int(got.advance) == expected.advance[k], \
            f"{what}: AS expected {expected.advance[k]} got {int(got.advance)} {bench.where()}"


@cocotb.test()
async def random_vectors_with_backpressure(dut):
    """Random candidate vectors (0.01% to 100% dense) and corner vectors, random valid and ready."""
    bench = await start(dut)
    await run_vectors(bench, valid_probability=0.7, ready_probability=0.6, count=400)


@cocotb.test()
async def one_vector_per_cycle(dut):
    """Without stalls the scheduler takes one vector per cycle and answers the next cycle."""
    bench = await start(dut)
    z, visible = candidate_vectors(bench, 50)
    source = StreamSource(dut, "i_candidates", bench.cycle, bench.rng, 1.0)
    sink = StreamSink(dut, "o_schedule", bench.cycle, bench.rng, 1.0)
    source.send(encode(bench, z, visible))
    await bench.wait_until(lambda: len(sink.received) >= len(z), timeout=200, what="schedules")
    sent = [cycle for cycle, _ in source.sent]
    received = [cycle for cycle, _ in sink.received]
    expected = [cycle + 1 for cycle in sent]
    assert received == expected and np.all(np.diff(sent) == 1), \
        f"timing: sent at {sent[:6]}..., expected results at {expected[:6]}..., got {received[:6]}... {bench.where()}"


@cocotb.test()
async def scenario_table(dut):
    """Every scenario of ``verif/scenarios/td_scheduler.py``: schedules as the reference, one cycle later at full rate."""
    bench = await start(dut)
    await run_table(bench, table)
