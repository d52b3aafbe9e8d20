"""``cp_pe``'s fast regression (:mod:`trainforge.vector_bench`, :mod:`fast_cp_pe`) catches broken PEs and broken expectations.

Runs in ``make test`` on Icarus only (one pass of the PE's table per run, well under a second each):

- the vectors of the hand-worked scenario, counted from the cocotb drive's rules (resets, one cycle per memory
  word, the ``en`` pattern), with and without a reset mid-stream;
- a wrong expectation (the last expected entry of every scenario, lowest bit flipped): exactly one mismatch per
  scenario, at that scenario's last transaction;
- three broken PEs, each a one-line change of the emitted Verilog: the reduction register subtracts ``red_in``;
  the SRAM is read in cycles without ``en``; the accumulator keeps its value through a reset. Each fails, its first
  mismatch's scenario seed replayed alone fails again, and the same seed on the real PE passes.
"""
import shutil

import pytest

import fast_cp_pe
import scenarios.cp_pe as table
from fast_regression import _passes, run_shard
from regression_common import scenario_seed
from trainforge import vector_bench
from trainforge.emit import emit_cached
from trainforge.errors import ParameterError
from trainforge.hw.registry import BLOCKS

pytestmark = pytest.mark.skipif(not shutil.which("iverilog"), reason="needs Icarus (iverilog)")

SEED = 21
PASS = scenario_seed(SEED, 0)

#: One-line faults of the emitted PE (defaults): (text, replacement).
FAULTS = {
    "reduction_subtracts": ("assign \\$13  = $signed(red) + $signed(red_in);",
                            "assign \\$13  = $signed(red) - $signed(red_in);"),
    "read_without_en": ("assign pe_read_enable = en & rd_en;", "assign pe_read_enable = rd_en;"),
    "accumulator_survives_reset": ("\\$20  = 32'd0;", "\\$20  = acc;"),
}


def _broken_pe(fault):
    text = emit_cached("cp_pe").text
    old, new = FAULTS[fault]
    assert text.count(old) == 1, f"the emitted PE no longer has the text the fault {fault!r} changes: {old!r}"
    return vector_bench.build("cp_pe", {}, "icarus", fast_cp_pe.CHECKED, verilog=text.replace(old, new),
                              tag=f"broken-{fault}")


def _hand_worked():
    (scenario,) = [s for s in table.scenarios(BLOCKS["cp_pe"].resolve(), PASS) if s.name == "hand-worked sequence"]
    return scenario


@pytest.mark.parametrize("reset_after", [0, 5])
def test_vectors_follow_the_cocotb_drive(reset_after):
    """The hand-worked scenario (4 memory words, 9 control words, ``en`` pattern 1 1 0): 2 reset cycles; with a reset
    mid-stream, ``reset_after`` cycles of traffic (the first idle) and 2 more reset cycles; 4 write cycles and one
    idle; 13 control cycles (every third disabled: the 9th enabled cycle is cycle 12); one cycle with ``en`` low."""
    bench = vector_bench.build("cp_pe", {}, "icarus", fast_cp_pe.CHECKED)
    layout = bench.header
    scenario = _hand_worked()
    words = fast_cp_pe.scenario_vectors(fast_cp_pe._Vectors(layout), BLOCKS["cp_pe"].resolve(), scenario,
                                        reset_after, table.CONTROL_NAMES)

    def field(word, name):
        offset, width = layout.offsets[name]
        return word >> offset & ((1 << width) - 1)

    interrupted = reset_after + 2 if reset_after else 0
    assert len(words) == 2 + interrupted + 4 + 1 + 13 + 1
    assert [field(w, "rst") for w in words[:2 + interrupted]] == [1, 1] + [0] * reset_after + [1, 1] * bool(reset_after)
    assert [field(w, "start") for w in words] == [1] + [0] * (len(words) - 1)
    assert sum(field(w, "reset") for w in words) == bool(reset_after)
    body = words[2 + interrupted:]
    assert [(field(w, "wr_en"), field(w, "wr_addr")) for w in body[:5]] == [(1, 0), (1, 1), (1, 2), (1, 3), (0, 0)]
    assert [field(w, "wr_data") for w in body[:4]] == [3, 0xFFFE, 5, 7]
    controls = body[5:-1]
    assert [field(w, "en") for w in controls] == [1, 1, 0] * 4 + [1]
    assert [field(w, "check") for w in controls] == [field(w, "en") for w in controls]
    assert [field(w, "row_bus") for w in controls if field(w, "en")][2:5] == [4, 0xFFFFFFFB, 0]
    assert field(body[-1], "en") == 0 and not any(field(w, "check") for w in words[:2 + interrupted])
    if reset_after:
        pre = words[2:2 + reset_after]
        assert field(pre[0], "wr_en") == 0 and [field(w, "wr_addr") for w in pre[1:5]] == [0, 1, 2, 3]


def test_real_pe_passes_a_pass():
    record = run_shard("cp_pe", "icarus", SEED, 1, replay=PASS, folder=None)
    assert record["mismatches"] == 0 and record["scenarios"] == len(table.scenarios(BLOCKS["cp_pe"].resolve(), PASS))
    enabled = sum(len(s.stimulus["controls"]) for s in table.scenarios(BLOCKS["cp_pe"].resolve(), PASS))
    assert record["input_beats"] == {"inputs": enabled} and record["output_beats"] == {"{acc, red}": enabled}


def test_wrong_expectation_fails_in_every_scenario_at_its_last_transaction(tmp_path):
    flipped = run_shard("cp_pe", "icarus", SEED, 1, replay=PASS, folder=tmp_path,
                        alter_expected=lambda name, entries: entries[:-1] + [entries[-1] ^ 1])
    scenarios = table.scenarios(BLOCKS["cp_pe"].resolve(), PASS)
    assert flipped["mismatches"] == len(scenarios)
    for detail, scenario in zip(flipped["mismatch_details"], scenarios):
        last = len(scenario.stimulus["controls"]) - 1
        assert detail["message"].startswith(f"{scenario.name}: {{acc, red}} transaction {last} expected 0x")
        assert detail["scenario_seed"] == PASS


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_pe_fails_and_its_seed_replays(fault, tmp_path):
    bench = _broken_pe(fault)
    record = run_shard("cp_pe", "icarus", SEED, 4000, bench=bench, folder=tmp_path / "run")
    assert record["mismatches"] > 0, f"{fault}: no mismatch in {record['scenarios']} scenarios"
    seed = record["mismatch_details"][0]["scenario_seed"]
    again = run_shard("cp_pe", "icarus", SEED, 1, bench=bench, replay=seed, folder=tmp_path / "replay")
    assert again["mismatches"] > 0
    assert run_shard("cp_pe", "icarus", SEED, 1, replay=seed, folder=tmp_path / "real")["mismatches"] == 0


def test_a_scenario_longer_than_the_testbench_is_named(tmp_path):
    """A batch holds at most the testbench's vectors; a scenario that fits none is refused by name."""
    from dataclasses import replace

    bench = replace(vector_bench.build("cp_pe", {}, "icarus", fast_cp_pe.CHECKED), depth=64)
    batches = fast_cp_pe.plan_batches(BLOCKS["cp_pe"].resolve(), bench, SEED, 10 ** 6, passes=_passes,
                                      table=table)
    with pytest.raises(ParameterError, match=r"cp_pe scenario '.*' \(scenario seed \d+\) has \d+ vectors; allowed: at "
                                        r"most the vector testbench's 64"):
        list(batches)
