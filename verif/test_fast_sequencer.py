"""``nt_sequencer``'s fast regression (:mod:`trainforge.sequencer_bench`, :mod:`fast_sequencer`) catches broken
sequencers and broken expectations.

Runs in ``make test`` on Icarus only (one pass of the sequencer's table per run, about a second each):

- a wrong word expectation (PE 1's queue, transaction 1 of every scenario, lowest bit flipped): a mismatch in
  exactly the scenarios that have that word, each naming that queue and transaction, with values that differ in
  that bit only;
- a wrong config expectation (each scenario's first layer's config, lowest bit flipped): a mismatch in every
  scenario, naming the layer config check or the rule that a word was taken under another config;
- three broken sequencers, each a change of the emitted Verilog: the state machine does not wait for the system's
  idle (the two ``if (system_idle)`` of the next-state logic, of ``o_layer`` and ``state``, made always true);
  ``o_config`` never takes the layer's config (one line); read PMAG 0's queue pointer does not restart on
  ``i_start`` (one line). Each fails naming what it breaks, its first mismatch's scenario seed replayed alone
  fails again, and the same seed on the real sequencer passes;
- a sequencer whose state register ignores ``rst`` (one line): in the pass, the first scenario that fails is one
  with a reset mid-stream, and it is not the first scenario (after it, the state machine never comes back to
  ``IDLE``, so the later ones fail too); the real sequencer passes the same pass
  (``test_real_sequencer_passes_one_pass``).
"""
import shutil

import pytest

import scenarios.nt_sequencer as table
from fast_regression import run_shard
from regression_common import scenario_seed
from trainforge import sequencer_bench
from trainforge.emit import emit_cached
from trainforge.hw.registry import BLOCKS

pytestmark = pytest.mark.skipif(not shutil.which("iverilog"), reason="needs Icarus (iverilog)")

SEED = 17
PASS = scenario_seed(SEED, 0)
PARAMS = BLOCKS["nt_sequencer"].resolve()

#: Faults of the emitted sequencer (defaults): (text, replacement, occurrences, what must be reported).
FAULTS = {
    "no_idle_wait": ("if (system_idle) begin", "if (1'h1) begin", 2, sequencer_bench.RULES[2]),
    "config_not_latched": ("      \\$43  = table_read__data[51:0];", "      \\$43  = o_config;", 1,
                           sequencer_bench.RULES[1]),
    "read_0_not_restarted": ("assign restart = i_start__valid & i_start__ready;", "assign restart = 1'h0;", 1,
                             "o_read_program__0 transaction"),
}


def _broken_sequencer(fault):
    text = emit_cached("nt_sequencer").text
    old, new, count, _ = FAULTS[fault]
    assert text.count(old) == count, \
        f"the emitted sequencer no longer has the text the fault {fault!r} changes: {old!r}"
    return sequencer_bench.build({}, "icarus", verilog=text.replace(old, new), tag=f"broken-{fault}")


def _pass(tmp_path, name, **options):
    return run_shard("nt_sequencer", "icarus", SEED, 1, replay=PASS, folder=tmp_path / name, **options)


def _flip(stream, index):
    def alter(name, entries):
        if name != stream or len(entries) <= index:
            return entries
        return entries[:index] + [entries[index] ^ 1] + entries[index + 1:]
    return alter


def test_real_sequencer_passes_one_pass(tmp_path):
    record = _pass(tmp_path, "real")
    assert record["mismatches"] == 0 and record["scenarios"] == len(table.scenarios(PARAMS, PASS))
    assert record["transactions"] > 0 and record["output_beats"]["o_pe_program__1"] > 0


def test_wrong_word_expectation_fails_exactly_where_it_is_wrong(tmp_path):
    wrong = {scenario.name for scenario in table.scenarios(PARAMS, PASS)
             if len(scenario.expected["o_pe_program__1"]) > 1}
    record = _pass(tmp_path, "word", alter_expected=_flip("o_pe_program__1", 1))
    assert record["mismatches"] == len(wrong) > 0, record["mismatch_details"]
    assert {detail["scenario"] for detail in record["mismatch_details"]} == wrong
    for detail in record["mismatch_details"]:
        assert f"{detail['scenario']}: o_pe_program__1 transaction 1 expected 0x" in detail["message"], detail
        expected, got = (int(part.split(",")[0], 16) for part in detail["message"].split("0x")[1:])
        assert expected ^ got == 1, detail


def test_wrong_config_expectation_fails_in_every_scenario(tmp_path):
    record = _pass(tmp_path, "config", alter_expected=_flip("o_config", 0))
    assert record["mismatches"] == record["scenarios"] == len(table.scenarios(PARAMS, PASS)), record
    assert {detail["scenario"] for detail in record["mismatch_details"]} == \
        {scenario.name for scenario in table.scenarios(PARAMS, PASS)}
    assert all("o_config transaction 0 expected 0x" in detail["message"]
               or sequencer_bench.RULES[1] in detail["message"]
               for detail in record["mismatch_details"]), record["mismatch_details"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_sequencer_fails_and_its_seed_replays(fault, tmp_path):
    bench = _broken_sequencer(fault)
    record = run_shard("nt_sequencer", "icarus", SEED, 2000, bench=bench, folder=tmp_path / "run")
    assert record["mismatches"] > 0, record
    assert any(FAULTS[fault][3] in detail["message"] for detail in record["mismatch_details"]), \
        [detail["message"] for detail in record["mismatch_details"]]
    detail = record["mismatch_details"][0]
    again = run_shard("nt_sequencer", "icarus", SEED, 1, bench=bench, replay=detail["scenario_seed"],
                      folder=tmp_path / "replay")
    assert again["mismatches"] > 0 and again["mismatch_details"][0]["scenario"] == detail["scenario"], again
    fixed = run_shard("nt_sequencer", "icarus", SEED, 1, replay=detail["scenario_seed"], folder=tmp_path / "fixed")
    assert fixed["mismatches"] == 0 and fixed["transactions"] > 0, fixed


def test_state_surviving_a_reset_fails_first_after_a_reset_mid_stream(tmp_path):
    text = emit_cached("nt_sequencer").text
    old = "    if (rst) begin\n      \\$42  = 3'h0;"
    assert text.count(old) == 1, "the emitted sequencer no longer resets its state register with this text"
    bench = sequencer_bench.build({}, "icarus", verilog=text.replace(old, "    if (rst) begin\n      \\$42  = state;"),
                                  tag="broken-state-reset")
    record = _pass(tmp_path, "state", bench=bench)
    assert record["resets_mid_stream"] > 0 and record["mismatches"] > 0, record
    first = record["mismatch_details"][0]
    assert first["reset_after"] > 0 and first["index"] > 0, first
