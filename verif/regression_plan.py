"""How ``make regress TRANSACTIONS=N`` splits the fast random regression into shards, from measured CPU rates.

Each block and simulator's ``N`` transactions are split into shards (one
pytest test and one process each, each with its own seed, summed in the
table). A shard holds at most :data:`SHARD_TRANSACTIONS` transactions and at
most :data:`SHARD_CPU_SECONDS` of projected CPU time at the block's measured
rate (:data:`CPU_RATES`, transactions per CPU-second: the Python process and
the simulator, user and system time, which is about what one idle core does).
The shards run longest first (``verif/conftest.py`` orders them), so that
pytest-xdist's workers finish together: on ``W`` idle cores the regression
takes about its CPU time over ``W`` plus the longest shard
(:func:`projection`; ``python verif/regression_plan.py N`` prints it).
"""
import math
import sys

__all__ = ["CPU_RATES", "COCOTB_CPU_RATES", "SHARD_TRANSACTIONS", "SHARD_CPU_SECONDS", "BUILD_CPU_SECONDS", "shard_targets",
           "projected_cpu_seconds", "projected_cocotb_seconds", "projection"]

#: At most this many transactions per shard.
SHARD_TRANSACTIONS = 250_000
#: At most this many projected CPU seconds per shard (the longest shard bounds how unevenly the workers end).
SHARD_CPU_SECONDS = 240

#: Measured transactions per CPU-second of the fast path, per block and simulator, in the form the regression plays
#: (``fast_regression.SIMULATOR_FORMS``). From the README's runs: 10^6 transactions where that run exists (seeds
#: 2027 and 2028), else 50 000 (seed 2026); ``nt_bus`` 50 000 and ``td_tile`` on Icarus (Yosys-optimised form)
#: 20 000, seed 2028, 2026-11-28; ``cp_pe`` (its vector testbench, :mod:`fast_cp_pe`) 10^6, seed 5, 2026-11-29, beside
#: a Verilator coverage run (load average 3 on the 2 cores).
CPU_RATES = {
    "cp_core": {"icarus": 3_248, "verilator": 118_587},
    "cp_pe": {"icarus": 42_431, "verilator": 74_207},
    "cp_reciprocal": {"icarus": 17_884, "verilator": 459_284},
    "cp_ring": {"icarus": 2_868, "verilator": 62_454},
    "dense_pe": {"icarus": 26_491, "verilator": 160_171},
    "fp32_add": {"icarus": 16_422, "verilator": 123_672},
    "fp_mul": {"icarus": 38_281, "verilator": 133_520},
    "nt_bus": {"icarus": 20_661, "verilator": 146_689},
    "nt_comparator": {"icarus": 20_323, "verilator": 136_864},
    "nt_lut": {"icarus": 81_468, "verilator": 847_208},
    "nt_mac": {"icarus": 3_225, "verilator": 71_951},
    "nt_pe": {"icarus": 885, "verilator": 7_921},
    "nt_pmag": {"icarus": 10_455, "verilator": 114_180},
    "nt_sequencer": {"icarus": 6_768, "verilator": 76_817},  # 50 000, seed 2028, 2026-11-30, load 2.9 (README)
    "nt_vault": {"icarus": 58_937, "verilator": 327_738},
    "stream_stage": {"icarus": 93_443, "verilator": 1_264_546},
    "td_pe": {"icarus": 2_868, "verilator": 29_959},
    "td_scheduler": {"icarus": 9_019, "verilator": 41_401},
    "td_tile": {"icarus": 562, "verilator": 6_925},
    "td_transposer": {"icarus": 47_159, "verilator": 181_455},
}
#: Measured transactions per CPU-second of the cocotb path (one unsharded process per block and simulator), for the
#: blocks that run on it under ``--regress-path auto``: ``nt_system`` at 10^6, seed 2030, 2026-11-30 (README).
COCOTB_CPU_RATES = {
    "nt_system": {"icarus": 1_548, "verilator": 2_112},
}
#: A block without a measured rate is planned at this one (the slowest measured), so that it is never under-sharded.
UNKNOWN_RATE = 562
#: CPU seconds of building every testbench once (measured: Icarus 0 to 12 s a block, Verilator 15 to 82 s; about
#: 9 minutes of wall time for all 34 on the loaded machine).
BUILD_CPU_SECONDS = 600


def projected_cpu_seconds(block_name, simulator, transactions):
    """CPU seconds of ``transactions`` of a block on a simulator, at its measured rate."""
    return transactions / CPU_RATES.get(block_name, {}).get(simulator, UNKNOWN_RATE)


def projected_cocotb_seconds(block_name, simulator, transactions):
    """CPU seconds of a block's cocotb-path run of ``transactions`` at its measured rate, or None (no rate)."""
    rate = COCOTB_CPU_RATES.get(block_name, {}).get(simulator)
    return None if rate is None else transactions / rate


def shard_targets(block_name, simulator, transactions, replay=False):
    """The transactions of each shard of a block's fast run (one shard when replaying a pass)."""
    if replay:
        return [transactions]
    shards = max(1, math.ceil(transactions / SHARD_TRANSACTIONS),
                 math.ceil(projected_cpu_seconds(block_name, simulator, transactions) / SHARD_CPU_SECONDS))
    return [transactions // shards + (1 if shard < transactions % shards else 0) for shard in range(shards)]


def projection(transactions, blocks, simulators=("icarus", "verilator"), workers=2):
    """The plan of a run: per block and simulator, shards and CPU seconds; the total and the wall time on ``workers`` cores.

    A block of :data:`COCOTB_CPU_RATES` counts as one run (the cocotb path, unsharded). The wall time is that of the shards dealt longest first to the least loaded of ``workers`` idle cores, plus
    :data:`BUILD_CPU_SECONDS` over the workers.
    """
    rows, shards = [], []
    for block in blocks:
        for simulator in simulators:
            cocotb = projected_cocotb_seconds(block, simulator, transactions)
            if cocotb is not None:  # one unsharded cocotb run
                rows.append({"block": block, "simulator": simulator, "shards": 1, "cpu_seconds": cocotb,
                             "longest_shard_seconds": cocotb})
                shards.append(cocotb)
                continue
            targets = shard_targets(block, simulator, transactions)
            seconds = [projected_cpu_seconds(block, simulator, target) for target in targets]
            rows.append({"block": block, "simulator": simulator, "shards": len(targets), "cpu_seconds": sum(seconds),
                         "longest_shard_seconds": max(seconds)})
            shards += seconds
    loads = [0.0] * workers
    for seconds in sorted(shards, reverse=True):
        loads[loads.index(min(loads))] += seconds
    return {"rows": rows, "cpu_seconds": sum(shards), "shards": len(shards),
            "wall_seconds": max(loads) + BUILD_CPU_SECONDS / workers}


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    blocks = sorted({*CPU_RATES, *COCOTB_CPU_RATES})
    plan = projection(count, blocks)
    print("| block | Icarus shards | Icarus CPU min | Verilator shards | Verilator CPU min |")
    print("| --- | ---: | ---: | ---: | ---: |")
    by = {(row["block"], row["simulator"]): row for row in plan["rows"]}
    for block in blocks:
        i, v = by[block, "icarus"], by[block, "verilator"]
        print(f"| {block} | {i['shards']} | {i['cpu_seconds'] / 60:.1f} | {v['shards']} | {v['cpu_seconds'] / 60:.1f} |")
    print(f"\n{plan['shards']} shards, {plan['cpu_seconds'] / 60:.1f} CPU minutes, builds {BUILD_CPU_SECONDS / 60:.0f}; "
          f"projected wall time on 2 idle cores: {plan['wall_seconds'] / 60:.1f} minutes")
