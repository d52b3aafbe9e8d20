"""Build-once, run-many cocotb simulation of registered blocks, and the simulator settings.

Each (block, parameters, simulator, waves) combination is built in its own
directory under ``build/sim/``, named by a hash of the resolved parameters. A
file lock serialises the build of one directory across pytest-xdist workers,
and a stamp holding the hash of the Verilog text skips the build when nothing
changed. Every test run gets a fresh run directory of its own, so workers
never share results files.

Coverage mode (``TRAINFORGE_COVERAGE=1``, or ``pytest --coverage-rtl``): the
Verilator runs are built with line and toggle coverage in build directories
of their own (``...-verilator-coverage``, so the cached normal builds stay as
they are), and each run's ``coverage.dat`` is kept in
``build/coverage/runs/<block>/`` with a JSON file beside it naming the block,
parameters, seed and Verilog source (:mod:`trainforge.coverage` merges and
summarises them). Icarus runs are unchanged in coverage mode.

The cocotb testbench modules live in the source checkout's ``verif/``
folder, which is not installed. The simulator process gets that folder on
its ``PYTHONPATH`` (:func:`testbench_dirs`); this process's ``sys.path`` is
never edited.
"""
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import uuid
import xml.etree.ElementTree as ElementTree
from contextlib import contextmanager

from .emit import emit_cached
from .errors import UsageError
from .hw.registry import params_key

__all__ = ["SIMULATORS", "VERILATOR_WAIVERS", "ICARUS_BUILD_ARGS", "TIMESCALE", "CLOCK_PERIOD_NS",
           "VERILATOR_MAKE_VARIABLES", "VERILATOR_COVERAGE_ARGS", "COVERAGE_ENV", "COVERAGE_RUNS",
           "SimulationFailure", "testbench_dirs", "coverage_requested", "build", "run"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD_ROOT = ROOT / "build" / "sim"

#: Environment variable that turns coverage mode on (any value but empty or ``0``).
COVERAGE_ENV = "TRAINFORGE_COVERAGE"

#: Where coverage mode keeps each Verilator run's ``coverage.dat``, one folder per block.
COVERAGE_RUNS = ROOT / "build" / "coverage" / "runs"

#: Verilator options of coverage mode: line (statement-block) and toggle coverage points.
VERILATOR_COVERAGE_ARGS = ["--coverage-line", "--coverage-toggle"]

SIMULATORS = ("icarus", "verilator")

#: Verilator warnings waived for Amaranth's generated Verilog, each for a reason
#: that holds for every block. Nothing else is waived.
VERILATOR_WAIVERS = [
    # Amaranth's back end sizes every operator by Amaranth's own rules and relies on
    # Verilog's context-determined extension when it writes `a + b` with narrower
    # operands; the result is exact by construction, so WIDTH reports no real bug.
    "-Wno-WIDTH",
    # Amaranth emits a named debug wire for every field of a struct or array view
    # (`\i_row__payload.a[0]`) and keeps the unused carry-out bits of adders whose
    # sums are truncated on purpose (wrap-around accumulators). They drive nothing.
    "-Wno-UNUSEDSIGNAL",
    # Amaranth writes a block and all of its submodules into the one file named after
    # the block, so every submodule's name differs from its file name by construction.
    "-Wno-DECLFILENAME",
]

#: Icarus options. cocotb compiles with -g2012, under which Icarus does not run an
#: `always @*` block at time zero unless one of its inputs changes; Amaranth's
#: start-up trigger (a `reg ... = 0` initialiser) makes no event in that mode, so
#: purely combinational logic can stay 'x' until its inputs move. Amaranth emits
#: Verilog-2005, and -g2005 (the later flag wins) restores the time-zero event.
ICARUS_BUILD_ARGS = ["-g2005"]

#: One time unit per ns, so that a 10 ns clock is exact in Icarus.
TIMESCALE = ("1ns", "1ps")

#: Clock period of every testbench, in ns.
CLOCK_PERIOD_NS = 10

#: Make variables for compiling Verilator's C++ model. The testbenches run a few
#: thousand cycles, so compile time dominates: -O0 builds about a third faster
#: than Verilator's default -Os, and the simulations stay well under a second.
VERILATOR_MAKE_VARIABLES = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"


def testbench_dirs():
    """Folders the simulator process imports testbench modules from: the checkout's ``verif/``.

    Raises :class:`~trainforge.errors.UsageError` when trainforge runs from an
    installation without its source checkout.
    """
    verif = ROOT / "verif"
    if not (verif / "tbutil.py").exists():
        raise UsageError(f"RTL simulation needs the source checkout's verif/ folder (the cocotb testbenches), "
                         f"not found at {verif}")
    return [verif]


class SimulationFailure(AssertionError):
    """A cocotb test failed; the message carries cocotb's own failure text."""


def waves_requested():
    return os.environ.get("WAVES", "0") not in ("", "0")


def coverage_requested():
    """Whether coverage mode is on (:data:`COVERAGE_ENV` set to anything but empty or ``0``)."""
    return os.environ.get(COVERAGE_ENV, "0") not in ("", "0")


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
    """cocotb's runner for ``simulator``, whose simulation process also imports from :func:`testbench_dirs`."""
    import warnings

    # cocotb 1.9 warns, when cocotb.runner is first imported, that its runners are experimental:
    # the import itself goes under the filter.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Python runners", category=UserWarning)
        from cocotb.runner import get_runner

        runner = get_runner(simulator)
    # cocotb 1.9 sets the simulator's PYTHONPATH from sys.path when a run starts;
    # the testbench folders go in front of it there, and only there.
    set_env = runner._set_env

    def _set_env_with_testbenches():
        set_env()
        runner.env["PYTHONPATH"] = os.pathsep.join([*map(str, testbench_dirs()), runner.env["PYTHONPATH"]])

    runner._set_env = _set_env_with_testbenches
    return runner


def simulator_version(simulator):
    """First line of the simulator's version text (for the reports' provenance)."""
    import subprocess

    command = {"icarus": ["iverilog", "-V"], "verilator": ["verilator", "--version"]}[simulator]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
        return (result.stdout or result.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def build(block_name, params, simulator, waves=False, coverage=False):
    """Build the simulation of one block once; return ``(runner, build_dir, params)``.

    With ``coverage`` (Verilator only), the model is built with
    :data:`VERILATOR_COVERAGE_ARGS` in a build directory of its own.
    """
    from .provenance import current, record_tool

    if current() is not None and simulator not in current()["tools"]:
        record_tool(simulator, simulator_version(simulator))
    emitted = emit_cached(block_name, **params)
    params = emitted.params
    key = params_key(block_name, params)
    coverage = coverage and simulator == "verilator"
    build_dir = BUILD_ROOT / f"{block_name}-{key}-{simulator}{'-waves' if waves else ''}{'-coverage' if coverage else ''}"
    build_args = list(VERILATOR_WAIVERS if simulator == "verilator" else ICARUS_BUILD_ARGS)
    if coverage:
        build_args += VERILATOR_COVERAGE_ARGS
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


def run(block_name, testbench, params, simulator, seed, testcase=None, extra_env=None):
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
    extra_env : dict, optional
        Further environment variables for the testbench.

    Returns
    -------
    pathlib.Path
        The run's own folder (log, results and whatever the testbench wrote).
    """
    waves = waves_requested()
    coverage = coverage_requested() and simulator == "verilator"
    runner, build_dir, params = build(block_name, params, simulator, waves=waves, coverage=coverage)
    run_id = uuid.uuid4().hex[:8]
    run_dir = build_dir / f"run-{run_id}"
    results = run_dir / "results.xml"
    env = {
        "TRAINFORGE_BLOCK": block_name,
        "TRAINFORGE_PARAMS": json.dumps(params),
        **(extra_env or {}),
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
        if coverage:
            # Verilator 5.006 writes coverage.dat in the run's folder (it has no option to name the file).
            _keep_coverage(run_dir / "coverage.dat", block_name, build_dir, run_id, params, testbench, seed, testcase)
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
    return run_dir


def _keep_coverage(written, block_name, build_dir, run_id, params, testbench, seed, testcase):
    """Copy a run's ``coverage.dat`` to :data:`COVERAGE_RUNS`, with a JSON description beside it; nothing when none was written."""
    if not written.exists():
        return
    folder = COVERAGE_RUNS / block_name
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{build_dir.name}-{run_id}"
    shutil.copyfile(written, folder / f"{stem}.dat")
    (folder / f"{stem}.json").write_text(json.dumps({
        "block": block_name, "params": params, "testbench": testbench, "testcase": testcase, "seed": seed,
        "source": str(build_dir / f"{block_name}.v"), "build_dir": str(build_dir)}, indent=1) + "\n")


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
