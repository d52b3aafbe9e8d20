"""``nt_bus``'s fast regression (:mod:`trainforge.bus_bench`, :mod:`fast_bus`) catches broken buses and broken expectations.

Runs in ``make test`` on Icarus only (one pass of the bus's table per run, a
second or two each):

- a wrong payload expectation (the last expected word of every expectation
  stream of every scenario, lowest bit flipped): exactly one mismatch per
  scenario;
- a wrong cycle expectation (the golden model's cycles of PE 0's broadcast
  words one cycle late): a mismatch in exactly the scenarios without
  backpressure where PE 0 receives a word, each naming the golden model;
- three broken buses, each a one-line change of the emitted Verilog: the
  arbitration gives PE 3 priority over PE 0; PE 0's merge port is ready while
  the common vault offers a word; the grant is not released by an END-MARK.
  Each fails naming the arbitration rule it breaks (5, 2 and 4), its first
  mismatch's scenario seed replayed alone fails again, and the same seed on the
  real bus passes.
"""
import shutil

import pytest

import scenarios.nt_bus as table
from fast_regression import run_shard
from regression_common import scenario_seed
from scenario import Transactions
from trainforge import bus_bench
from trainforge.emit import emit_cached

pytestmark = pytest.mark.skipif(not shutil.which("iverilog"), reason="needs Icarus (iverilog)")

SEED = 13
PASS = scenario_seed(SEED, 0)

#: One-line faults of the emitted bus (defaults: 4 PEs): (text, replacement, what must be reported).
FAULTS = {
    "pe3_before_pe0": ("        if (merge_request[0]) begin\n", "        if (merge_request[0] && !merge_request[3]) begin\n",
                       bus_bench.RULES[5]),
    "merge_during_broadcast": ("assign i_merge__0__ready = \\$25  & merge_grant[0];",
                               "assign i_merge__0__ready = i_broadcast__ready & merge_grant[0];", bus_bench.RULES[2]),
    "grant_kept_after_end_mark": ("    end else if (\\$37 ) begin\n      \\$43  = 4'h0;",
                                  "    end else if (\\$37 ) begin\n      \\$43  = merge_grant;", bus_bench.RULES[4]),
}


def _broken_bus(fault):
    text = emit_cached("nt_bus").text
    old, new, _ = FAULTS[fault]
    assert text.count(old) == 1, f"the emitted bus no longer has the text the fault {fault!r} changes: {old!r}"
    return bus_bench.build({}, "icarus", verilog=text.replace(old, new), tag=f"broken-{fault}")


def _pass(tmp_path, name, **options):
    return run_shard("nt_bus", "icarus", SEED, 1, replay=PASS, folder=tmp_path / name, **options)


def _flip_last(stream, entries):
    return entries[:-1] + [entries[-1] ^ 1] if entries else entries


def test_real_bus_passes_one_pass(tmp_path):
    record = _pass(tmp_path, "real")
    assert record["mismatches"] == 0 and record["scenarios"] == len(table.scenarios({"pes": 4, "width": 32}, PASS))
    assert record["transactions"] > 0


def test_wrong_payload_expectation_fails_in_every_scenario(tmp_path):
    record = _pass(tmp_path, "flipped", alter_expected=_flip_last)
    assert record["mismatches"] == record["scenarios"] > 0, record["mismatch_details"][:3]
    assert all("expected 0x" in detail["message"] for detail in record["mismatch_details"])


def test_wrong_golden_cycles_fail_where_they_are_wrong(tmp_path, monkeypatch):
    real = table.golden

    def late(params, scenario):
        predicted = real(params, scenario)
        cycles = dict(predicted.cycles)
        if "o_broadcast__0" in cycles:
            cycles["o_broadcast__0"] = [cycle + 1 for cycle in cycles["o_broadcast__0"]]
        return Transactions(predicted.items, cycles)

    monkeypatch.setattr(table, "golden", late)
    scenarios = table.scenarios({"pes": 4, "width": 32}, PASS)
    wrong = {scenario.name for scenario in scenarios
             if not (scenario.valid or scenario.ready) and scenario.expected["o_broadcast__0"]}
    record = _pass(tmp_path, "late")
    assert record["mismatches"] == len(wrong) > 0, record["mismatch_details"]
    assert {detail["scenario"] for detail in record["mismatch_details"]} == wrong
    assert all("o_broadcast__0 transaction 0 expected at cycle" in detail["message"]
               and "(the golden model)" in detail["message"] for detail in record["mismatch_details"])


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_bus_fails_and_its_seed_replays(fault, tmp_path):
    bench = _broken_bus(fault)
    record = run_shard("nt_bus", "icarus", SEED, 2000, bench=bench, folder=tmp_path / "run")
    assert record["mismatches"] > 0, record
    assert any(FAULTS[fault][2] in detail["message"] for detail in record["mismatch_details"]), \
        [detail["message"] for detail in record["mismatch_details"]]
    detail = record["mismatch_details"][0]
    again = run_shard("nt_bus", "icarus", SEED, 1, bench=bench, replay=detail["scenario_seed"],
                      folder=tmp_path / "replay")
    assert again["mismatches"] > 0 and again["mismatch_details"][0]["scenario"] == detail["scenario"], again
    fixed = run_shard("nt_bus", "icarus", SEED, 1, replay=detail["scenario_seed"], folder=tmp_path / "fixed")
    assert fixed["mismatches"] == 0 and fixed["transactions"] > 0, fixed
