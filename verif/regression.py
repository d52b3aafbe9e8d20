"""The long random regression of a block's scenario table on the RTL (``make regress TRANSACTIONS=N``).

A testbench opts in with one line, ``random_regression = regression_test(table)``.
The cocotb test runs the block's table (``verif/scenarios/<block>.py``) over
and over, each pass with a fresh scenario seed, until the stream monitors have
counted the requested number of transactions. Each table scenario brings its
own random ``valid`` and ``ready`` patterns (backpressure and gaps), and the
expected values come from the table's reference, the output cycles from the
golden cycle model, exactly as in ``scenario_table``.

Transaction
    One accepted beat (``valid`` and ``ready`` high at a rising edge) on any
    stream port of the block, input or output, as recorded by the
    :class:`~trainforge.cocotb_streams.StreamSource` and
    :class:`~trainforge.cocotb_streams.StreamSink` monitors, in a scenario
    whose outputs were then checked. Beats accepted before a reset mid-stream
    are counted apart (``beats_before_reset``): nothing checks them.

Reset mid-stream
    Before a scenario, with probability :data:`RESET_PROBABILITY`, the
    scenario's stimulus starts flowing under its own patterns; after a random
    number of cycles the sources drop what they hold and the block is reset
    while transactions are in flight. Then the same scenario runs again from
    the start and is checked: the reference and the golden model restart from
    reset too, so any state that survived the reset is a mismatch.

Mismatch
    A scenario whose outputs (payloads, count, or cycles) differ from the
    expectation, or that timed out. The run goes on after it (a reset brings
    the block back); each mismatch is recorded with the scenario seed that
    replays its table pass alone (``TRAINFORGE_REGRESS_REPLAY=<seed>``).

The test writes its counts as JSON to ``$TRAINFORGE_REGRESS_REPORT`` (or
``regress.json`` in the run folder) and fails when any mismatch was found.
Without ``TRAINFORGE_TRANSACTIONS`` the test is skipped, so ``make test``
runs the testbenches exactly as before.
"""
import json
import os
import sys
import time

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from regression_common import (DETAILED_MISMATCHES, MAX_MISMATCHES, REPLAY_ENV, REPORT_ENV, RESET_PROBABILITY,
                               TRANSACTIONS_ENV, reset_after, scenario_seed)
from scenario import _in_bits, _stream_drivers, run_on_rtl
from tbutil import start

__all__ = ["TRANSACTIONS_ENV", "REPLAY_ENV", "REPORT_ENV", "RESET_PROBABILITY", "scenario_seed",
           "TableHarness", "run_regression", "regression_test"]

class TableHarness:
    """Drivers on every stream port of the block, for a whole cocotb test; plays one table scenario at a time.

    Parameters
    ----------
    bench : tbutil.Bench
    module : module
        The block's scenario table.
    golden_cycles : bool
        Check the output cycles against the golden cycle model, as ``scenario_table`` does.
    run_scenario : async callable, optional
        ``run_scenario(bench, shapes, sources, sinks, scenario)``: a testbench's own runner of one table
        scenario (raising ``AssertionError`` on a mismatch), instead of :func:`scenario.run_on_rtl`.

    A testbench with drivers of its own gives :func:`regression_test` another class with the same
    members: ``sources`` and ``sinks`` (port -> monitor, whose ``sent`` and ``received`` are counted),
    ``play(scenario)`` (checked), ``start(scenario)`` (traffic starts, nothing waits) and ``drop()``.
    """

    def __init__(self, bench, module, golden_cycles=True, run_scenario=None):
        self.bench, self.module, self.golden_cycles, self.run_scenario = bench, module, golden_cycles, run_scenario
        self.shapes, self.sources, self.sinks, self.encode = _stream_drivers(bench)

    async def play(self, scenario):
        if self.run_scenario is not None:
            await self.run_scenario(self.bench, self.shapes, self.sources, self.sinks, scenario)
            return
        in_bits = _in_bits(self.bench, self.module, scenario, self.encode, self.golden_cycles)
        await run_on_rtl(self.bench, in_bits, self.sources, self.sinks, decode=lambda port, bits: int(bits),
                         encode=self.encode)

    async def start(self, scenario):
        await FallingEdge(self.bench.dut.clk)
        for port, source in self.sources.items():
            source.follow(scenario.valid.get(port, (1,)))
            source.send([self.encode(port, item) for item in scenario.stimulus.get(port, ())])
        for port, sink in self.sinks.items():
            sink.follow(scenario.ready.get(port, (1,)))

    def drop(self):
        for source in self.sources.values():
            source.drop()


def _beats(harness):
    return (sum(len(source.sent) for source in harness.sources.values())
            + sum(len(sink.received) for sink in harness.sinks.values()))


async def _reset_mid_stream(bench, harness, scenario, cycles):
    """Start ``scenario``'s traffic, reset the block after ``cycles`` cycles; return the beats accepted before."""
    before = _beats(harness)
    await harness.start(scenario)
    for _ in range(cycles):
        await RisingEdge(bench.dut.clk)
    harness.drop()
    await bench.reset()
    return _beats(harness) - before


async def run_regression(bench, module, target, replay=None, harness=None):
    """Run passes of ``module``'s table until ``target`` checked transactions; return the counts (a dict).

    Parameters
    ----------
    bench : tbutil.Bench
    module : module
        The block's scenario table (``scenarios`` and ``golden``).
    target : int
        Checked transactions to reach (the last pass stops at the scenario that reaches it).
    replay : int, optional
        A scenario seed: run that single pass (whole table) only.
    harness : TableHarness or alike, optional
        Plays the scenarios (default: a :class:`TableHarness` of ``module``).
    """
    harness = harness or TableHarness(bench, module)
    sources, sinks = harness.sources, harness.sinks
    record = {
        "block": bench.block.name, "params": bench.params, "cocotb_seed": bench.seed, "target": target,
        "replay": replay, "transactions": 0,
        "input_beats": dict.fromkeys(sources, 0), "output_beats": dict.fromkeys(sinks, 0),
        "passes": 0, "scenarios": 0, "resets_mid_stream": 0, "beats_before_reset": 0,
        "mismatches": 0, "mismatch_details": [], "cycles": 0, "wall_seconds": 0.0,
    }
    began, first_cycle = time.monotonic(), bench.cycle.now
    iteration = 0
    while record["mismatches"] < MAX_MISMATCHES and (
            record["transactions"] < target if replay is None else iteration == 0):
        seed = replay if replay is not None else scenario_seed(bench.seed, iteration)
        for index, scenario in enumerate(module.scenarios(bench.params, seed)):
            await bench.reset()
            cycles = reset_after(scenario, seed, index)
            if cycles:
                record["beats_before_reset"] += await _reset_mid_stream(bench, harness, scenario, cycles)
                record["resets_mid_stream"] += 1
            sent = {port: len(source.sent) for port, source in sources.items()}
            received = {port: len(sink.received) for port, sink in sinks.items()}
            try:
                await harness.play(scenario)
            except AssertionError as failure:
                harness.drop()
                record["mismatches"] += 1
                if len(record["mismatch_details"]) < DETAILED_MISMATCHES:
                    record["mismatch_details"].append({
                        "scenario_seed": seed, "pass": iteration, "scenario": scenario.name, "index": index,
                        "message": str(failure)[:400]})
            for port, source in sources.items():
                record["input_beats"][port] += len(source.sent) - sent[port]
            for port, sink in sinks.items():
                record["output_beats"][port] += len(sink.received) - received[port]
            record["transactions"] = sum(record["input_beats"].values()) + sum(record["output_beats"].values())
            record["scenarios"] += 1
            if replay is None and record["transactions"] >= target:
                break
        record["passes"] += 1
        iteration += 1
    record["cycles"] = bench.cycle.now - first_cycle
    record["wall_seconds"] = round(time.monotonic() - began, 3)
    return record


def regression_test(table, golden_cycles=True, run_scenario=None, harness=None):
    """The cocotb test ``random_regression`` of a block's table (:func:`run_regression`), skipped without a target.

    A testbench says ``random_regression = regression_test(table)``; it may pass its own one-scenario
    runner as ``run_scenario``, or a harness class (``harness(bench)``, the members of
    :class:`TableHarness`) for drivers of its own.
    """
    async def random_regression(dut):
        bench = await start(dut)
        target = int(os.environ[TRANSACTIONS_ENV])
        replay = os.environ.get(REPLAY_ENV) or None
        plays = harness(bench) if harness is not None else TableHarness(bench, table, golden_cycles, run_scenario)
        record = await run_regression(bench, table, target, replay=None if replay is None else int(replay),
                                      harness=plays)
        path = os.environ.get(REPORT_ENV) or "regress.json"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as handle:
            json.dump(record, handle, indent=1)
        dut._log.info("random regression: %d transactions (%d in, %d out), %d mismatches, %d resets mid-stream, "
                      "%d cycles in %.1f s", record["transactions"], sum(record["input_beats"].values()),
                      sum(record["output_beats"].values()), record["mismatches"], record["resets_mid_stream"],
                      record["cycles"], record["wall_seconds"])
        seeds = sorted({detail["scenario_seed"] for detail in record["mismatch_details"]})
        assert record["mismatches"] == 0, (
            f"{record['mismatches']} mismatching scenarios; first: {record['mismatch_details'][0]['message']}; "
            f"replay a pass with {REPLAY_ENV}=<scenario seed>, seeds {seeds} {bench.where()}")

    random_regression.__doc__ = ("Passes of the scenario table with fresh seeds, backpressure and resets mid-stream, "
                                 f"until ${TRANSACTIONS_ENV} checked transactions (skipped without it).")
    random_regression.__qualname__ = "random_regression"
    random_regression.__module__ = sys._getframe(1).f_globals["__name__"]
    return cocotb.test(skip=TRANSACTIONS_ENV not in os.environ)(random_regression)
