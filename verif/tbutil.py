"""Common set-up of the cocotb testbenches: parameters, seed, clock, reset, waiting."""
import functools
import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from trainforge.hw.registry import get_block

from trainforge.simulation import CLOCK_PERIOD_NS
from trainforge.cocotb_streams import Cycle

__all__ = ["Bench", "start"]


class Bench:
    """What a testbench needs to know about the run.

    Attributes
    ----------
    dut : cocotb handle
    block : Block
        The registered block under test.
    params : dict
        Its resolved parameters (the same dict the Verilog was generated from).
    component : wiring.Component
        The Amaranth component rebuilt with ``params``, for its layouts and shapes.
    seed : int
        cocotb's ``RANDOM_SEED``; replay a run with ``pytest --seed`` or ``RANDOM_SEED``.
    rng : random.Random
        Seeded from :attr:`seed`.
    cycle : Cycle
    """

    def __init__(self, dut):
        self.dut = dut
        self.block = get_block(os.environ["TRAINFORGE_BLOCK"])
        self.params = json.loads(os.environ["TRAINFORGE_PARAMS"])
        self.component = _component(self.block.name, os.environ["TRAINFORGE_PARAMS"])
        self.seed = cocotb.RANDOM_SEED
        self.rng = random.Random(self.seed)
        self.cycle = Cycle(dut.clk)

    def where(self):
        """Suffix for assertion messages: block, parameters and seed, to replay the failure."""
        return f"[{self.block.name} {self.params} seed={self.seed}]"

    async def reset(self, cycles=2):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0

    async def wait_until(self, condition, timeout, what):
        """Wait, cycle by cycle, until ``condition()``; fail after ``timeout`` cycles."""
        for _ in range(timeout):
            if condition():
                return
            await RisingEdge(self.dut.clk)
        assert condition(), f"timed out after {timeout} cycles waiting for {what} {self.where()}"


@functools.lru_cache(maxsize=None)
def _component(block_name, params_json):
    """The block's component, made once per simulation process (every cocotb test of a testbench reads the same
    one; ``nt_system``'s took 0.13 s to make)."""
    return get_block(block_name).component(**json.loads(params_json))


async def start(dut):
    """Start the clock, reset the DUT and return a :class:`Bench`."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, units="ns").start())
    bench = Bench(dut)
    dut._log.info("block %s params %s seed %d", bench.block.name, bench.params, bench.seed)
    await bench.reset()
    return bench
