"""Build-once, run-many cocotb simulation of registered blocks.

Each (block, parameters, simulator, waves) combination is built in its own
directory under ``build/sim/``, named by a hash of the resolved parameters. A
file lock serialises the build of one directory across pytest-xdist workers,
and a stamp holding the hash of the Verilog text skips the build when nothing
changed. Every test run gets a fresh run directory of its own, so workers
never share results files.
"""
import fcntl
import hashlib
import json
import os
import pathlib
import sys
import uuid
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager

from trainforge.emit import emit
from trainforge.hw.registry import params_key

from toolchain import ICARUS_BUILD_ARGS, TIMESCALE, VERILATOR_MAKE_VARIABLES, VERILATOR_WAIVERS

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD_ROOT = ROOT / "build" / "sim"
VERIF_DIR = pathlib.Path(__file__).resolve().parent

SIMULATORS = ("icarus", "verilator")

# cocotb hands the simulator this process's sys.path as PYTHONPATH: the testbench
# modules must be importable from it whatever the working directory.
if str(VERIF_DIR) not in sys.path:
    sys.path.insert(0, str(VERIF_DIR))


class SimulationFailure(AssertionError):
    """A cocotb test failed; the message carries cocotb's own failure text."""


def waves_requested():
    return os.environ.get("WAVES", "0") not in ("", "0")


@contextmanager
def _make_variables(simulator):
    """Pass Verilator's compile options through MAKEFLAGS (the runner's ``make`` reads them)."""
    if simulator != "verilator":
        yield
        return
    saved = os.environ.get("MAKEFLAGS")
    os.environ["MAKEFLAGS"] = f"{saved or ''} {VERILATOR_MAKE_VARIABLES}".strip()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["MAKEFLAGS"]
        else:
            os.environ["MAKEFLAGS"] = saved


@contextmanager
def _locked(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _runner(simulator):
    import warnings

    from cocotb.runner import get_runner

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Python runners", category=UserWarning)
        return get_runner(simulator)


def build(block_name, params, simulator, waves=False):
    """Build the simulation of one block once; return ``(runner, build_dir, params)``."""
    emitted = emit(block_name, **params)
    params = emitted.params
    key = params_key(block_name, params)
    build_dir = BUILD_ROOT / f"{block_name}-{key}-{simulator}{'-waves' if waves else ''}"
    build_args = list(VERILATOR_WAIVERS if simulator == "verilator" else ICARUS_BUILD_ARGS)
    stamp_text = hashlib.sha256(
        json.dumps([emitted.text, build_args, VERILATOR_MAKE_VARIABLES, waves]).encode()).hexdigest()
    runner = _runner(simulator)
    with _locked(build_dir.with_suffix(".lock")):
        stamp = build_dir / ".trainforge-stamp"
        source = build_dir / f"{block_name}.v"
        if not (stamp.exists() and stamp.read_text() == stamp_text):
            build_dir.mkdir(parents=True, exist_ok=True)
            source.write_text(emitted.text)
            with _make_variables(simulator):
                runner.build(
                    verilog_sources=[source],
                    hdl_toplevel=block_name,
                    build_dir=build_dir,
                    build_args=build_args,
                    timescale=TIMESCALE,
                    waves=waves,
                    always=True,
                )
            stamp.write_text(stamp_text)
    return runner, build_dir, params


def run(block_name, testbench, params, simulator, seed, testcase=None):
    """Run the cocotb ``testbench`` module against one block; raise :class:`SimulationFailure` on failure.

    Parameters
    ----------
    block_name : str
        Registered block.
    testbench : str
        cocotb test module, importable from ``verif/``.
    params : dict
        Parameter overrides for the block (validated against its schema).
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    seed : int
        Random seed handed to cocotb (``RANDOM_SEED``).
    testcase : str, optional
        Run one cocotb test of the module only.
    """
    waves = waves_requested()
    runner, build_dir, params = build(block_name, params, simulator, waves=waves)
    run_dir = build_dir / f"run-{uuid.uuid4().hex[:8]}"
    results = run_dir / "results.xml"
    env = {
        "TRAINFORGE_BLOCK": block_name,
        "TRAINFORGE_PARAMS": json.dumps(params),
    }
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        runner.test(
            test_module=testbench,
            hdl_toplevel=block_name,
            hdl_toplevel_lang="verilog",
            build_dir=build_dir,
            test_dir=run_dir,
            seed=seed,
            testcase=testcase,
            extra_env=env,
            results_xml=str(results),
            waves=waves,
            timescale=TIMESCALE,
        )
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    if waves:
        wave_file = build_dir / f"{block_name}.fst" if simulator == "icarus" else run_dir / "dump.vcd"
        print(f"waveform: {wave_file}")
    failures = _failures(results)
    if failures:
        raise SimulationFailure(
            f"{block_name} {params} on {simulator}, seed {seed}: " + "; ".join(failures)
            + f" (log and results in {run_dir})")


def _failures(results):
    if not results.exists():
        return [f"the simulation ended without writing {results}"]
    failures = []
    tree = ElementTree.parse(results)
    for case in tree.iter("testcase"):
        for failure in case.iter("failure"):
            failures.append(f"{case.get('name')}: {failure.get('message') or failure.text or 'failed'}")
    if not any(True for _ in tree.iter("testcase")):
        failures.append("no cocotb test ran")
    return failures
