"""The long random regression: every block whose testbench has ``random_regression``, on both simulators.

Runs only with ``--regress`` (``make regress``); the transaction count per
block and simulator is ``--transactions N`` (``make regress TRANSACTIONS=N``).
Two paths, chosen per block by ``--regress-path`` (``auto`` by default: the
fast path for the blocks of :data:`fast_regression.FAST_BLOCKS`, cocotb for
the rest):

- **cocotb** (:mod:`regression`): one long cocotb run per block and
  simulator, on the block's default parameters (one build each); payloads and
  output cycles checked. Writes ``build/reports/regress/runs/<block>-<simulator>.json``.
- **fast** (:mod:`fast_regression`): a self-checking Verilog testbench plays
  batches of the same table passes; payloads and order checked. The
  transactions are split into shards of at most
  :data:`fast_regression.SHARD_TRANSACTIONS`, one test (and one process) each,
  each with its own seed; each writes ``<block>-<simulator>-fast-<shard>.json``.

The session's end gathers the runs (``build/reports/regress/summary.json`` and
``table.md``, shards summed) and prints the table. A mismatch fails the test
and names the seeds that replay it: the base seed (``--seed``) replays the
whole run, ``TRAINFORGE_REGRESS_REPLAY=<scenario seed>`` one table pass of it.
"""
import json
import math
import os
import pathlib

import pytest

from fast_regression import FAST_BLOCKS, SHARD_TRANSACTIONS, run_shard
from regression_common import REPLAY_ENV, REPORT_ENV, TRANSACTIONS_ENV
from trainforge import simulation
from trainforge.hw.registry import BLOCKS
from trainforge.regression import RUNS

VERIF = pathlib.Path(__file__).resolve().parent


def regression_blocks():
    """Registered blocks whose testbench defines ``random_regression``."""
    return [name for name, block in BLOCKS.items()
            if "regression_test(" in (VERIF / f"{block.testbench}.py").read_text()]


def blocks_without_regression():
    return [name for name in BLOCKS if name not in regression_blocks()]


def regression_path(block_name, choice):
    """``"fast"`` or ``"cocotb"``: the path of a block's regression under ``--regress-path choice``."""
    return "fast" if choice in ("auto", "fast") and block_name in FAST_BLOCKS else "cocotb"


def shard_targets(transactions):
    """The transactions of each shard of a fast run of ``transactions`` (one shard when replaying a pass)."""
    shards = 1 if os.environ.get(REPLAY_ENV) else max(1, math.ceil(transactions / SHARD_TRANSACTIONS))
    return [transactions // shards + (1 if shard < transactions % shards else 0) for shard in range(shards)]


def pytest_generate_tests(metafunc):
    if "shard" in metafunc.fixturenames:
        shards = len(shard_targets(metafunc.config.getoption("--transactions")))
        metafunc.parametrize("shard", range(shards), ids=[f"shard{k}" for k in range(shards)])


def _replay_command(request, transactions):
    base = request.config.option.seed
    return (f"pytest --regress --seed {base} --transactions {transactions} "
            f"--regress-path {request.config.getoption('--regress-path')} '{request.node.nodeid}' "
            f"(one pass: {REPLAY_ENV}=<scenario seed> with the same command)")


def _check(record, block_name, simulator, transactions, replay_command):
    seeds = sorted({detail["scenario_seed"] for detail in record["mismatch_details"]})
    assert record["mismatches"] == 0, (
        f"{block_name} on {simulator}: {record['mismatches']} mismatching scenarios of {record['scenarios']}, "
        f"scenario seeds {seeds}; first: {record['mismatch_details'][0]['message'].splitlines()[0]}; "
        f"replay: {replay_command}")
    assert record["transactions"] >= transactions or os.environ.get(REPLAY_ENV), (
        f"{block_name} on {simulator}: only {record['transactions']} transactions of {transactions}")


@pytest.mark.regress
@pytest.mark.parametrize("simulator", simulation.SIMULATORS)
@pytest.mark.parametrize("block_name", regression_blocks())
def test_random_regression(block_name, simulator, seed, request):
    """The cocotb path: one long cocotb run of the block's table (payloads and cycles checked)."""
    if regression_path(block_name, request.config.getoption("--regress-path")) != "cocotb":
        pytest.skip(f"{block_name} runs on the fast path (test_fast_regression)")
    transactions = request.config.getoption("--transactions")
    report = RUNS / f"{block_name}-{simulator}.json"
    report.unlink(missing_ok=True)
    env = {TRANSACTIONS_ENV: str(transactions), REPORT_ENV: str(report)}
    if os.environ.get(REPLAY_ENV):
        env[REPLAY_ENV] = os.environ[REPLAY_ENV]
    replay_command = _replay_command(request, transactions)
    failure = None
    try:
        simulation.run(block_name, BLOCKS[block_name].testbench, {}, simulator, seed,
                       testcase="random_regression", extra_env=env)
    except simulation.SimulationFailure as error:
        failure = error
    assert report.exists(), f"{block_name} on {simulator} wrote no regression counts: {failure}"
    record = json.loads(report.read_text())
    record.update(simulator=simulator, path="cocotb", base_seed=request.config.option.seed, test_seed=seed,
                  replay_command=replay_command)
    report.write_text(json.dumps(record, indent=1) + "\n")
    _check(record, block_name, simulator, transactions, replay_command)
    assert failure is None, str(failure)


@pytest.mark.regress
@pytest.mark.parametrize("simulator", simulation.SIMULATORS)
@pytest.mark.parametrize("block_name", FAST_BLOCKS)
def test_fast_regression(block_name, simulator, shard, seed, request):
    """The fast path: one shard of the block's table played by the self-checking Verilog testbench."""
    if regression_path(block_name, request.config.getoption("--regress-path")) != "fast":
        pytest.skip(f"{block_name} runs on the cocotb path (test_random_regression)")
    transactions = request.config.getoption("--transactions")
    targets = shard_targets(transactions)
    replay = os.environ.get(REPLAY_ENV)
    report = RUNS / f"{block_name}-{simulator}-fast-{shard}.json"
    report.unlink(missing_ok=True)
    replay_command = _replay_command(request, transactions)
    record = run_shard(block_name, simulator, seed, targets[shard], replay=None if replay is None else int(replay))
    record.update(shard=shard, shards=len(targets), requested=transactions, base_seed=request.config.option.seed,
                  test_seed=seed, replay_command=replay_command)
    RUNS.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(record, indent=1) + "\n")
    _check(record, block_name, simulator, targets[shard], replay_command)
