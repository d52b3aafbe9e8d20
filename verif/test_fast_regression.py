"""The fast random regression's harness catches broken hardware and broken expectations, and names seeds that replay them.

Runs in ``make test`` on Icarus only (a few seconds): ``stream_stage``'s
self-checking testbench (:mod:`trainforge.stream_bench`) with the batches of
:mod:`fast_regression`, against

- three stream stages broken in the ways the formal tests break them
  (``test_formal.BrokenStreamStage``): one that drops a transaction arriving
  while its output is busy, one that duplicates its skid register, one that
  overwrites a stalled output;
- the same broken stage in the Yosys-optimised form (``stream_bench.FORMS``) that ``td_tile`` plays on Icarus;
- a stage whose reset is not connected (its valid bits survive a reset): only
  the scenarios with a reset mid-stream may fail;
- a table whose expectation is wrong in one place (scenario "extreme
  payloads", transaction 2 expected as 1 instead of 0): exactly one mismatch
  per pass, there.

Each mismatch names its scenario seed; replaying that seed alone
(``replay=``) fails again on the broken design and passes on the real one.
"""
import shutil

import pytest
from amaranth import ClockDomain, ClockSignal, Module
from amaranth.back import verilog
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

import scenarios.stream_stage as stage_table
from fast_regression import FAST_BLOCKS, SIMULATOR_PARAMS, VECTOR_BLOCKS, packer, run_shard
from regression_common import scenario_seed
from scenario import payload_shapes, to_bits
from test_formal import BrokenStreamStage
from trainforge import stream_bench
from trainforge.hw.registry import BLOCKS
from trainforge.hw.stream_stage import StreamStage

pytestmark = pytest.mark.skipif(not shutil.which("iverilog"), reason="needs Icarus (iverilog)")

#: Transactions of a run: a few scenarios of the table (a broken stage times out in most, which costs cycles).
TRANSACTIONS = 600


class StageWithoutReset(wiring.Component):
    """The real stream stage in a clock domain without reset: what it holds survives ``rst``."""

    def __init__(self, width):
        super().__init__({"i_stream": In(stream.Signature(width)), "o_stream": Out(stream.Signature(width))})

    def elaborate(self, platform):
        from amaranth.hdl import DomainRenamer

        m = Module()
        m.domains.noreset = ClockDomain("noreset", reset_less=True)
        m.d.comb += ClockSignal("noreset").eq(ClockSignal("sync"))
        m.submodules.stage = stage = DomainRenamer("noreset")(StreamStage(width=width_of(self)))
        wiring.connect(m, wiring.flipped(self.i_stream), stage.i_stream)
        wiring.connect(m, stage.o_stream, wiring.flipped(self.o_stream))
        return m


def width_of(component):
    return len(component.i_stream.payload)


def _bench(design, tag):
    """The stream_stage testbench around ``design`` (Verilog under the block's module name), built on Icarus."""
    text = verilog.convert(design, name="stream_stage", emit_src=False)
    return stream_bench.build("stream_stage", {}, "icarus", verilog=text, tag=tag)


@pytest.mark.parametrize("fault", ["drops_when_busy", "keeps_skid", "overwrites_output"])
def test_broken_stage_fails_and_its_seed_replays(fault, tmp_path):
    bench = _bench(BrokenStreamStage(8, fault), f"broken-{fault}")
    record = run_shard("stream_stage", "icarus", 11, TRANSACTIONS, bench=bench, folder=tmp_path / "run")
    assert record["mismatches"] > 0, record
    detail = record["mismatch_details"][0]
    assert detail["scenario_seed"] in {scenario_seed(11, k) for k in range(record["passes"])}
    again = run_shard("stream_stage", "icarus", 11, TRANSACTIONS, bench=bench, replay=detail["scenario_seed"],
                      folder=tmp_path / "replay")
    assert again["mismatches"] > 0 and again["mismatch_details"][0]["scenario"] == detail["scenario"], again
    fixed = run_shard("stream_stage", "icarus", 11, TRANSACTIONS, replay=detail["scenario_seed"],
                      folder=tmp_path / "fixed")
    assert fixed["mismatches"] == 0 and fixed["transactions"] > 0, fixed


def test_yosys_optimised_form_passes_the_real_stage_and_fails_a_broken_one(tmp_path):
    """The ``"yosys-opt"`` form (``td_tile`` on Icarus plays it) keeps a fault: a broken stage fails in it too."""
    real = stream_bench.build("stream_stage", {}, "icarus", form="yosys-opt")
    assert (real.folder / "block_opt.v").exists() and real.form == "yosys-opt"
    record = run_shard("stream_stage", "icarus", 11, TRANSACTIONS, bench=real, folder=tmp_path / "real")
    assert record["mismatches"] == 0 and record["transactions"] >= TRANSACTIONS, record
    text = verilog.convert(BrokenStreamStage(8, "drops_when_busy"), name="stream_stage", emit_src=False)
    broken = stream_bench.build("stream_stage", {}, "icarus", verilog=text, tag="broken-drops_when_busy",
                                form="yosys-opt")
    record = run_shard("stream_stage", "icarus", 11, TRANSACTIONS, bench=broken, folder=tmp_path / "broken")
    assert record["mismatches"] > 0, record


def test_state_surviving_a_reset_fails_only_after_a_reset_mid_stream(tmp_path):
    bench = _bench(StageWithoutReset(8), "no-reset")
    record = run_shard("stream_stage", "icarus", 3, 8 * TRANSACTIONS, bench=bench, folder=tmp_path)
    assert record["resets_mid_stream"] > 0
    assert record["mismatches"] > 0, record
    assert all(detail["reset_after"] > 0 for detail in record["mismatch_details"]), record["mismatch_details"]


def test_wrong_expectation_fails_where_it_is(tmp_path, monkeypatch):
    real = stage_table.scenarios

    def mutated(params, seed):
        table = real(params, seed)
        for index, scenario in enumerate(table):
            if scenario.name == "extreme payloads":
                expected = list(scenario.expected["o_stream"])
                expected[2] = 1
                table[index] = type(scenario)(scenario.name, scenario.stimulus, {"o_stream": expected},
                                              scenario.valid, scenario.ready, scenario.timing)
        return table

    monkeypatch.setattr(stage_table, "scenarios", mutated)
    record = run_shard("stream_stage", "icarus", 5, TRANSACTIONS, folder=tmp_path)
    assert record["mismatches"] == record["passes"] >= 1, record
    assert [d["message"] for d in record["mismatch_details"]][0] == (
        "extreme payloads: o_stream transaction 2 expected 0x01, got 0x00")
    assert record["mismatch_details"][0]["scenario_seed"] == scenario_seed(5, 0)


@pytest.mark.parametrize("block_name", [name for name in FAST_BLOCKS if name not in VECTOR_BLOCKS])
def test_packer_packs_as_to_bits(block_name):
    """The fast path's packing of table items equals the cocotb path's (:func:`scenario.to_bits`); the vector
    blocks pack no stream payloads (``verif/test_fast_cp_pe.py`` checks their vectors)."""
    params = BLOCKS[block_name].resolve()
    component = BLOCKS[block_name].build(**params)
    shapes = payload_shapes(component)
    module = __import__(f"scenarios.{block_name}", fromlist=["scenarios"])
    compared = 0
    for scenario in module.scenarios(params, 7):
        for port, items in [*scenario.stimulus.items(), *scenario.expected.items()]:
            if port not in shapes:
                continue   # not a stream (nt_bus's REQ cycles, mask trace, grants, per-PE merge lists)
            pack = packer(shapes[port][1])
            for item in items[:4]:
                assert pack(item) == to_bits(shapes[port][1], item), (block_name, port, item)
                compared += 1
    assert compared > 0



def _flip_last(port, payloads):
    """The expected payloads of one port of one scenario with the last one's lowest bit flipped."""
    return payloads[:-1] + [payloads[-1] ^ 1] if payloads else payloads


@pytest.mark.regress
@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
@pytest.mark.parametrize("block_name", FAST_BLOCKS)
def test_every_block_fails_on_a_wrong_expectation(block_name, simulator, tmp_path):
    """``make regress`` only: with the last expected payload of every port of every scenario changed (its lowest
    bit flipped), one pass of the table on the fast path finds exactly one mismatch per scenario that expects an
    output, for every fast block on both simulators."""
    module = __import__(f"scenarios.{block_name}", fromlist=["scenarios"])
    table = module.scenarios(BLOCKS[block_name].resolve(**SIMULATOR_PARAMS.get((block_name, simulator), {})),
                             scenario_seed(9, 0))
    expecting = sum(1 for scenario in table if any(scenario.expected.values()))
    record = run_shard(block_name, simulator, 9, 1, folder=tmp_path, replay=scenario_seed(9, 0),
                       alter_expected=_flip_last)
    assert record["scenarios"] == len(table)
    assert record["mismatches"] == expecting > 0, record["mismatch_details"][:3]


def _shard_record(shard, shards, base_seed, transactions, mismatches=0, mtime=0.0):
    return {"block": "fp_mul", "simulator": "icarus", "path": "fast", "shard": shard, "shards": shards,
            "requested": 1000, "target": 1000 // shards, "base_seed": base_seed, "cocotb_seed": 100 + shard,
            "transactions": transactions, "input_beats": {"i_operands": transactions // 2},
            "output_beats": {"o_product": transactions // 2}, "resets_mid_stream": 1, "beats_before_reset": 3,
            "scenarios": 2, "cycles": 10, "wall_seconds": 2.0, "cpu_seconds": 1.0, "mismatches": mismatches,
            "mismatch_details": [{"scenario_seed": 7}] if mismatches else [], "_mtime": mtime}


def test_summary_sums_the_shards_of_the_latest_session():
    """Shards of one session are summed into one row; shards left from an older session (other seed) are not."""
    from trainforge.regression import summary

    records = [_shard_record(0, 2, 5, 500, mtime=10), _shard_record(1, 2, 5, 600, mismatches=1, mtime=11),
               *(_shard_record(k, 4, 9, 250, mtime=1) for k in range(4))]
    (row,) = summary(records)["rows"]
    assert (row["path"], row["shards"], row["transactions"], row["mismatches"]) == ("fast", 2, 1100, 1)
    assert (row["input_beats"], row["target"], row["wall_seconds"], row["cpu_seconds"]) == (550, 1000, 4.0, 2.0)
    assert row["mismatch_seeds"] == [7] and row["shard_seeds"] == [100, 101]


def test_every_fast_block_has_measured_rates_and_its_shards_add_up():
    """The shard plan (``regression_plan``) knows every fast block's CPU rate on both simulators, its shards sum
    to the transactions asked for, and no shard exceeds either bound."""
    from regression_plan import (CPU_RATES, SHARD_CPU_SECONDS, SHARD_TRANSACTIONS, projected_cpu_seconds,
                                 shard_targets)

    for block_name in FAST_BLOCKS:
        for simulator in ("icarus", "verilator"):
            assert CPU_RATES[block_name][simulator] > 0, (block_name, simulator)
            for transactions in (2_000, 1_000_000, 3_333_333):
                targets = shard_targets(block_name, simulator, transactions)
                assert sum(targets) == transactions, (block_name, simulator, targets)
                assert max(targets) <= SHARD_TRANSACTIONS or len(targets) == 1
                assert (projected_cpu_seconds(block_name, simulator, max(targets)) <= SHARD_CPU_SECONDS
                        or len(targets) == 1), (block_name, simulator, targets)


@pytest.mark.parametrize("block_name", FAST_BLOCKS)
def test_every_scenario_fits_the_fast_testbench(block_name):
    """At the parameters ``make regress`` plays (the block's defaults), every scenario of one pass of the table has
    at most the fast testbench's payloads per port (:data:`trainforge.stream_bench.DEFAULT_DEPTH`): a larger one
    fits no batch, and the planner stops the shard on it (``cp_ring``'s stalled-sums scenario loaded 132 352 words
    at the ring's defaults and stopped every 10^6 shard)."""
    params = BLOCKS[block_name].resolve(**SIMULATOR_PARAMS.get((block_name, "icarus"), {}))
    module = __import__(f"scenarios.{block_name}", fromlist=["scenarios"])
    largest = {}
    for scenario in module.scenarios(params, scenario_seed(2028, 0)):
        for port, items in [*scenario.stimulus.items(), *scenario.expected.items()]:
            if not isinstance(items, int):  # nt_sequencer's system_idle_delay is a setting, not a stream
                largest[port] = max(largest.get(port, 0), len(items))
    assert largest and max(largest.values()) <= stream_bench.DEFAULT_DEPTH, largest
