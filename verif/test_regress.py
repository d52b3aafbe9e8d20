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
  batches of the same table passes; payloads and order checked (``nt_bus``:
  also the arbitration every cycle and the golden model's output cycles;
  ``nt_sequencer``: also ``o_config`` and the system's idle). The
  transactions are split into shards planned from the measured CPU rates
  (:mod:`regression_plan`), one test (and one process) each, each with its own
  seed, longest first; each writes ``<block>-<simulator>-fast-<shard>.json``.

The session's end gathers the runs (``build/reports/regress/summary.json`` and
``table.md``, shards summed) and prints the table. A mismatch fails the test
and names the seeds that replay it: the base seed (``--seed``) replays the
whole run, ``TRAINFORGE_REGRESS_REPLAY=<scenario seed>`` one table pass of it.
"""
import json
import os
import pathlib

import pytest

from fast_regression import FAST_BLOCKS, run_shard
from regression_common import REPLAY_ENV, REPORT_ENV, TRANSACTIONS_ENV
from regression_plan import projected_cocotb_seconds, projected_cpu_seconds
from regression_plan import shard_targets as planned_shards
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


def shard_targets(block_name, simulator, transactions):
    """The transactions of each shard of a block's fast run (one shard when replaying a pass)."""
    return planned_shards(block_name, simulator, transactions, replay=bool(os.environ.get(REPLAY_ENV)))


def fast_shards(transactions):
    """``(block, simulator, shard)`` of every shard of the fast regression of ``transactions`` per block and simulator."""
    return [(block, simulator, shard) for block in FAST_BLOCKS for simulator in simulation.SIMULATORS
            for shard in range(len(shard_targets(block, simulator, transactions)))]


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ == "test_fast_regression":
        shards = fast_shards(metafunc.config.getoption("--transactions"))
        metafunc.parametrize(("block_name", "simulator", "shard"), shards,
                             ids=[f"{block}-{simulator}-shard{shard}" for block, simulator, shard in shards])


def shard_cpu_seconds(item):
    """Projected CPU seconds of a ``test_fast_regression`` item, or of a ``test_random_regression`` item on the
    cocotb path with a measured rate (``regression_plan.COCOTB_CPU_RATES``), for running the longest first; else None."""
    name = getattr(item, "originalname", None)
    if name == "test_random_regression":
        block, simulator = (item.callspec.params[key] for key in ("block_name", "simulator"))
        if regression_path(block, item.config.getoption("--regress-path")) != "cocotb":
            return None
        return projected_cocotb_seconds(block, simulator, item.config.getoption("--transactions"))
    if name != "test_fast_regression":
        return None
    block, simulator, shard = (item.callspec.params[key] for key in ("block_name", "simulator", "shard"))
    targets = shard_targets(block, simulator, item.config.getoption("--transactions"))
    return projected_cpu_seconds(block, simulator, targets[shard])


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
def test_fast_regression(block_name, simulator, shard, seed, request):
    """The fast path: one shard of the block's table played by the self-checking Verilog testbench."""
    if regression_path(block_name, request.config.getoption("--regress-path")) != "fast":
        pytest.skip(f"{block_name} runs on the cocotb path (test_random_regression)")
    transactions = request.config.getoption("--transactions")
    targets = shard_targets(block_name, simulator, transactions)
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
