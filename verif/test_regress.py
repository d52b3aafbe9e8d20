"""The long random regression: every block whose testbench has ``random_regression``, on both simulators.

Runs only with ``--regress`` (``make regress``); the transaction count per
block and simulator is ``--transactions N`` (``make regress TRANSACTIONS=N``).
One long cocotb run per block and simulator, on the block's default
parameters (one build each). Each run writes
``build/reports/regress/runs/<block>-<simulator>.json``; the session's end
gathers them (``build/reports/regress/summary.json`` and ``table.md``) and
prints the table. A mismatch fails the test and names the seeds that replay
it: the base seed (``--seed``) replays the whole run,
``TRAINFORGE_REGRESS_REPLAY=<scenario seed>`` one table pass of it.
"""
import json
import os
import pathlib

import pytest

from trainforge import simulation
from trainforge.hw.registry import BLOCKS
from trainforge.regression import RUNS

VERIF = pathlib.Path(__file__).resolve().parent
#: Same names as verif/regression.py (the cocotb side; not importable here without a simulator).
TRANSACTIONS_ENV = "TRAINFORGE_TRANSACTIONS"
REPLAY_ENV = "TRAINFORGE_REGRESS_REPLAY"
REPORT_ENV = "TRAINFORGE_REGRESS_REPORT"


def regression_blocks():
    """Registered blocks whose testbench defines ``random_regression``."""
    return [name for name, block in BLOCKS.items()
            if "regression_test(" in (VERIF / f"{block.testbench}.py").read_text()]


def blocks_without_regression():
    return [name for name in BLOCKS if name not in regression_blocks()]


@pytest.mark.regress
@pytest.mark.parametrize("simulator", simulation.SIMULATORS)
@pytest.mark.parametrize("block_name", regression_blocks())
def test_random_regression(block_name, simulator, seed, request):
    transactions = request.config.getoption("--transactions")
    report = RUNS / f"{block_name}-{simulator}.json"
    report.unlink(missing_ok=True)
    env = {TRANSACTIONS_ENV: str(transactions), REPORT_ENV: str(report)}
    if os.environ.get(REPLAY_ENV):
        env[REPLAY_ENV] = os.environ[REPLAY_ENV]
    base = request.config.option.seed
    replay_command = (f"pytest --regress --seed {base} --transactions {transactions} '{request.node.nodeid}' "
                      f"(one pass: {REPLAY_ENV}=<scenario seed> with the same command)")
    failure = None
    try:
        simulation.run(block_name, BLOCKS[block_name].testbench, {}, simulator, seed,
                       testcase="random_regression", extra_env=env)
    except simulation.SimulationFailure as error:
        failure = error
    assert report.exists(), f"{block_name} on {simulator} wrote no regression counts: {failure}"
    record = json.loads(report.read_text())
    record.update(simulator=simulator, base_seed=base, test_seed=seed, replay_command=replay_command)
    report.write_text(json.dumps(record, indent=1) + "\n")
    seeds = sorted({detail["scenario_seed"] for detail in record["mismatch_details"]})
    assert record["mismatches"] == 0, (
        f"{block_name} on {simulator}: {record['mismatches']} mismatching scenarios of {record['scenarios']}, "
        f"scenario seeds {seeds}; first: {record['mismatch_details'][0]['message'].splitlines()[0]}; "
        f"replay: {replay_command}")
    assert failure is None, str(failure)
    assert record["transactions"] >= transactions or os.environ.get(REPLAY_ENV), (
        f"{block_name} on {simulator}: only {record['transactions']} transactions of {transactions}")
