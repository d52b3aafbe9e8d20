"""pytest set-up of the trainforge suite: seeds, markers, and ``verif/`` on the import path.

``pytest --coverage-rtl`` turns on the coverage mode of the simulations
(:mod:`trainforge.simulation`), as ``TRAINFORGE_COVERAGE=1`` does.

Seeds: ``pytest --seed N`` (or ``SEED=N``) fixes the base seed; otherwise one
is drawn per session and shown in the header. Each test derives its own seed
from the base seed and its node id, so ``pytest --seed N NODEID`` replays one
test exactly, under xdist or not.

Random regression: ``pytest --regress --transactions N`` (``make regress
TRANSACTIONS=N``) sets the checked transactions per block and simulator of
``verif/test_regress.py``; its per-block table is printed at the session's
end and written under ``build/reports/regress/``.
"""
import os
import random
import sys
import zlib

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None,
                     help="base random seed (default: $SEED or a fresh one, shown in the header)")
    parser.addoption("--regress", action="store_true",
                     help="also run the long sweeps marked 'regress' (make regress)")
    parser.addoption("--transactions", type=int, default=int(os.environ.get("TRANSACTIONS", 2000)),
                     help="random regression (verif/test_regress.py, with --regress): checked stream transactions "
                          "per block and simulator (default: $TRANSACTIONS or 2000; make regress TRANSACTIONS=N)")
    parser.addoption("--regress-path", choices=("auto", "cocotb", "fast"),
                     default=os.environ.get("REGRESS_PATH", "auto"),
                     help="random regression: 'fast' (self-checking Verilog testbench, payloads and order) for the "
                          "blocks that have it and cocotb for the rest ('auto', the default), or one path for every "
                          "block that has it (default: $REGRESS_PATH or auto; make regress REGRESS_PATH=...)")
    parser.addoption("--coverage-rtl", action="store_true",
                     help="coverage mode: Verilator runs built with line and toggle coverage, each run's "
                          "coverage.dat kept under build/coverage/runs/ (make coverage; TRAINFORGE_COVERAGE=1)")


def pytest_configure(config):
    if config.getoption("--coverage-rtl"):
        os.environ["TRAINFORGE_COVERAGE"] = "1"
    config.addinivalue_line("markers", "regress: long sweep, run by 'make regress' (pytest --regress)")
    if hasattr(config, "workerinput"):
        config.option.seed = config.workerinput["trainforge_seed"]
    elif config.option.seed is None:
        config.option.seed = int(os.environ.get("SEED", random.randrange(1 << 31)))
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_SeedToWorkers())


class _SeedToWorkers:
    """Hands the controller's base seed to every xdist worker."""

    @staticmethod
    def pytest_configure_node(node):
        node.workerinput["trainforge_seed"] = node.config.option.seed


def pytest_terminal_summary(terminalreporter, config):
    """With --regress, on the controller: gather the random-regression runs and print their table.

    Every run under build/reports/regress/runs/ counts (each test replaces its own block and simulator's
    file), so that sessions over different blocks or simulators add up to one table.
    """
    if not config.getoption("--regress") or hasattr(config, "workerinput"):
        return
    from trainforge.regression import REPORTS, table, write_summary

    result = write_summary()
    if result is None:
        return
    terminalreporter.section("random regression: transactions and mismatches per block")
    terminalreporter.write(table(result))
    terminalreporter.write_line(f"written to {REPORTS / 'summary.json'} and {REPORTS / 'table.md'}")


def pytest_report_header(config):
    return f"trainforge base seed: {config.option.seed} (replay with --seed {config.option.seed})"


def pytest_collection_modifyitems(config, items):
    if config.getoption("--regress"):
        _longest_shards_first(items)
        return
    skip = pytest.mark.skip(reason="long sweep: run with 'make regress'")
    for item in items:
        if "regress" in item.keywords:
            item.add_marker(skip)


def _longest_shards_first(items):
    """Put the fast regression's shards first, longest projected CPU time first (``regression_plan``).

    pytest-xdist hands tests to the workers in this order, so the long shards start early and the workers end
    together; the other tests keep their order, after the shards.
    """
    from test_regress import shard_cpu_seconds

    costs = [(shard_cpu_seconds(item), index, item) for index, item in enumerate(items)]
    shards = sorted((entry for entry in costs if entry[0] is not None), key=lambda entry: (-entry[0], entry[1]))
    items[:] = [item for _, _, item in shards] + [item for cost, _, item in costs if cost is None]


@pytest.fixture
def seed(request):
    """This test's seed, derived from the base seed and the test's node id."""
    value = zlib.crc32(f"{request.config.option.seed}:{request.node.nodeid}".encode()) & 0x7FFFFFFF
    print(f"seed {value} (base seed {request.config.option.seed})")
    return value
