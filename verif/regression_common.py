"""What the two random regressions share: the environment variables, the seeds and the resets mid-stream.

The cocotb regression (:mod:`regression`, inside the simulator) and the fast one
(:mod:`fast_regression`, a self-checking Verilog testbench) play the same
passes of a block's scenario table for the same scenario seed, and interrupt
the same scenarios by a reset mid-stream after the same number of cycles, so a
scenario seed named by either replays that pass on both. Nothing here imports
cocotb.
"""
import zlib

from scenario import rng_for
from trainforge.stream_bench import pattern_bits
# TRANSACTIONS_ENV: checked transactions to reach (the test is skipped without it); REPLAY_ENV: a scenario seed run
# alone (replays a recorded mismatch); REPORT_ENV: where the JSON counts go.
from trainforge.regression import REPLAY_ENV, REPORT_ENV, TRANSACTIONS_ENV
from trainforge.stream_bench import DETAILED_MISMATCHES, MAX_MISMATCHES

__all__ = ["TRANSACTIONS_ENV", "REPLAY_ENV", "REPORT_ENV", "RESET_PROBABILITY", "DETAILED_MISMATCHES",
           "MAX_MISMATCHES", "TIMEOUT_PER_TRANSFER", "scenario_seed", "reset_after", "timeout_cycles",
           "handshake_fields", "add_to_batch"]

#: Chance that a scenario is first interrupted by a reset mid-stream.
RESET_PROBABILITY = 0.25
# DETAILED_MISMATCHES (described in full in the JSON; all are counted) and MAX_MISMATCHES (a run stops after
# this many: the block is broken, more adds nothing) are the fast testbench's own, trainforge.stream_bench's.
#: Cycles allowed per transfer of a scenario (``scenario.run_on_rtl``'s default).
TIMEOUT_PER_TRANSFER = 40


def scenario_seed(seed, iteration):
    """The scenario seed of pass ``iteration`` of a run with seed ``seed``."""
    return zlib.crc32(f"{seed}:regress:{iteration}".encode()) & 0x7FFFFFFF


def reset_after(scenario, seed, index):
    """Cycles of traffic before a reset mid-stream of scenario ``index`` of the pass ``seed``, or 0 for none.

    With probability :data:`RESET_PROBABILITY`, a number in ``[1, 2 * transfers + 12)``.
    """
    rng = rng_for(seed, "reset mid-stream", index)
    if rng.random() < RESET_PROBABILITY:
        return rng.randrange(1, 2 * scenario.transfers + 12)
    return 0


def timeout_cycles(scenario):
    """Cycles a scenario may take before it counts as a timeout (``scenario.run_on_rtl``'s rule)."""
    return TIMEOUT_PER_TRANSFER * (scenario.transfers + 10) + 200


def handshake_fields(scenario, inputs, input_items, outputs, output_items=None):
    """A fast testbench's header fields of a scenario's handshakes: per input port ``k`` (``inputs`` names them,
    ``input_items`` their payload lists) ``in<k>_count``, ``in<k>_length`` and ``in<k>_pattern`` (its ``valid``
    pattern); per output port ``out<k>_length`` and ``out<k>_pattern`` (``ready``), and ``out<k>_count`` when
    ``output_items`` gives the expected payloads per port."""
    fields = {}
    for k, (port, items) in enumerate(zip(inputs, input_items)):
        length, bits = pattern_bits(scenario.valid.get(port, (1,)))
        fields.update({f"in{k}_count": len(items), f"in{k}_length": length, f"in{k}_pattern": bits})
    for k, port in enumerate(outputs):
        length, bits = pattern_bits(scenario.ready.get(port, (1,)))
        fields.update({f"out{k}_length": length, f"out{k}_pattern": bits})
        if output_items is not None:
            fields[f"out{k}_count"] = len(output_items[k])
    return fields


def add_to_batch(plan, stimulus, expected, entry, ins, outs):
    """Append one scenario to a batch: its ``plan`` entry, its stimulus (per input memory) and its expected entries
    (per expectation memory)."""
    plan.append(entry)
    for memory, items in zip(stimulus, ins):
        memory += items
    for memory, items in zip(expected, outs):
        memory += items
