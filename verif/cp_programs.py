"""Running a program of ``cp_core`` or ``cp_ring`` commands and checking its results (shared by both benches).

A program (``tb_cp_core.Program``, ``tb_cp_ring.RingProgram``) holds per
command: its ``i_cmd`` word (``commands``), its ``i_data`` words
(``inputs``), the ``o_data`` words the golden model expects (``outputs``), the
golden schedule (``schedules``) and a label for messages (``labels``).
"""
import numpy as np
from cocotb.triggers import RisingEdge

from trainforge.cocotb_streams import StreamSink, StreamSource, pack, unpack


__all__ = ["attach", "queue", "reset_and_check_idle", "run_and_check"]


def attach(bench, valid_probability, ready_probability):
    """Drivers of ``i_cmd`` and ``i_data`` and a monitor of ``o_data``, with random valid gaps and ready.

    A block with an ``o_error`` stream (``cp_core``) gets it always ready: these programs hold no rejected
    command (the scenario tables check ``o_error``).
    """
    if hasattr(bench.dut, "o_error__ready"):
        bench.dut.o_error__ready.value = 1
    return (StreamSource(bench.dut, "i_cmd", bench.cycle, bench.rng, valid_probability),
            StreamSource(bench.dut, "i_data", bench.cycle, bench.rng, valid_probability),
            StreamSink(bench.dut, "o_data", bench.cycle, bench.rng, ready_probability))


def queue(bench, program, ports, data_layout):
    """Queue every command of ``program`` on ``i_cmd`` and its operand words on ``i_data``."""
    commands, data, _ = ports
    commands.send([pack(bench.component.cmd_layout, command) for command in program.commands])
    data.send([pack(data_layout, [int(value) for value in word]) for words in program.inputs for word in words])


async def reset_and_check_idle(bench, ports, block):
    """Drop what is still queued, reset, and check that ``block`` offers no result and takes a command."""
    commands, data, _ = ports
    commands.drop()
    data.drop()
    await bench.reset(cycles=2)
    await RisingEdge(bench.dut.clk)
    assert bench.dut.o_data__valid.value == 0, f"o_data still valid after reset {bench.where()}"
    assert bench.dut.i_cmd__ready.value == 1, f"{block} not ready for a command after reset {bench.where()}"


async def run_and_check(bench, program, ports, data_layout, result_layout):
    """Queue ``program``, wait for every result and compare it bit-exactly with the golden model's.

    (Cycles are checked by the blocks' scenario tables, at full rate, against the golden schedules.)
    """
    commands, data, sink = ports
    n_r = program.n_r
    before_results = len(sink.received)
    queue(bench, program, ports, data_layout)
    expected = np.concatenate(program.outputs)
    budget = sum(int(schedule.issue_cycles) + 2 for schedule in program.schedules)
    await bench.wait_until(lambda: commands.idle and data.idle and len(sink.received) >= before_results + len(expected),
                           timeout=20 * budget + 200, what=f"{len(expected)} result words")
    for _ in range(10):  # nothing extra may follow
        await RisingEdge(bench.dut.clk)
    received = sink.received[before_results:]
    assert len(received) == len(expected), \
        f"expected {len(expected)} result words, got {len(received)} {bench.where()}"
    actual = np.array([[unpack(result_layout, bits)[lane] for lane in range(n_r)] for _, bits in received],
                      dtype=np.int64).reshape(-1, n_r)
    first = 0
    for label, outputs in zip(program.labels, program.outputs):
        rows = slice(first, first + len(outputs))
        wrong = np.argwhere(actual[rows] != outputs)
        assert wrong.size == 0, (
            f"{label}: word {wrong[0][0]} lane {wrong[0][1]} expected {outputs[tuple(wrong[0])]} "
            f"got {actual[rows][tuple(wrong[0])]} ({len(wrong)} mismatches) {bench.where()}")
        first += len(outputs)
