"""Verilator line and toggle coverage of the registered blocks: merged per block, lcov info, HTML and a summary.

The coverage mode of :mod:`trainforge.simulation` (``TRAINFORGE_COVERAGE=1``)
keeps each Verilator run's ``coverage.dat`` in
``build/coverage/runs/<block>/``, with a JSON file beside it that names the
run's parameters and Verilog source. :func:`merge_block` merges one block's
runs with ``verilator_coverage --write`` (which adds the counts of the same
point), writes lcov info with ``verilator_coverage --write-info`` (lines in
``coverage.info``, toggles in ``toggle.info``), HTML with ``genhtml`` when it
is installed (Debian's ``lcov``), and returns the block's summary:
line and toggle percentages, and every uncovered line with its Verilog text
and, where the emitted Verilog's ``src`` attributes tell, the Amaranth source
line of the signal whose logic it is.

Line coverage counts Verilator's ``v_line`` and ``v_branch`` points (statement
blocks and both arms of every ``if``), toggle coverage its ``v_toggle`` points
(each bit of each signal). A Verilog line's count is the one
``verilator_coverage --write-info`` gives it: the lowest count of the points
on it (each point adds its count to the line it is on and to the lines it
spans). So a line is covered only when every point on it was reached: an
``if`` line counts as covered only when both of its arms were taken. The points
of Amaranth's start-up trigger are left out by construction: Amaranth's
Verilog back end declares ``reg \\$auto$verilog_backend...dump_module$1 = 0``
and opens every ``always @*`` block with ``if (<that reg>) begin end``, so that
Icarus evaluates the block at time zero. The register never changes and the
empty branch is never taken in any design, so those points would count as
uncovered in every block without saying anything about the tests.
"""
import json
import pathlib
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from .errors import UsageError

__all__ = ["Point", "STARTUP_TRIGGER", "read_points", "write_points", "merge_dats", "lcov_lines",
           "source_locations", "merge_block", "summarize", "markdown", "by_source", "number", "runs_by_block"]

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Text of every line of Amaranth's start-up trigger (see the module's docstring); their points are left out.
STARTUP_TRIGGER = "$auto$verilog_backend"

#: Verilator point pages (the part before ``/``) of each kind of coverage.
LINE_PAGES = ("v_line", "v_branch")
TOGGLE_PAGES = ("v_toggle",)

_POINT = re.compile(r"^C '(.*)' (\d+)\s*$")


@dataclass(frozen=True)
class Point:
    """One coverage point of a Verilator ``coverage.dat``.

    Parameters
    ----------
    key : str
        The point's key exactly as written (fields separated by ``\\x01``, name from value by ``\\x02``).
    count : int
        How often the point was reached.
    """
    key: str
    count: int
    fields: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if not self.fields:
            pairs = (item.split("\x02", 1) for item in self.key.split("\x01") if item)
            object.__setattr__(self, "fields", {name: value for name, value in pairs})

    @property
    def file(self):
        return self.fields.get("f", "")

    @property
    def line(self):
        return int(self.fields.get("l", 0))

    @property
    def page(self):
        """The point's kind: ``v_line``, ``v_branch`` or ``v_toggle``."""
        return self.fields.get("page", "").split("/")[0]

    @property
    def comment(self):
        return self.fields.get("o", "")

    @property
    def spans(self):
        """The source lines the point stands for (Verilator's ``S`` field: ``"49"``, ``"50-51"``, ``"46,48"``)."""
        lines = []
        for part in filter(None, self.fields.get("S", "").split(",")):
            low, _, high = part.partition("-")
            lines.extend(range(int(low), int(high or low) + 1))
        return lines


def read_points(path):
    """The points of a Verilator ``coverage.dat`` (header and comment lines skipped)."""
    points = []
    for number, line in enumerate(pathlib.Path(path).read_text(errors="surrogateescape").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        match = _POINT.match(line)
        if match is None:
            raise UsageError(f"{path}:{number} is not a Verilator coverage point: {line[:80]!r}")
        points.append(Point(match.group(1), int(match.group(2))))
    return points


def write_points(points, path):
    """Write ``points`` as a Verilator ``coverage.dat`` that ``verilator_coverage`` reads."""
    text = "# SystemC::Coverage-3\n" + "".join(f"C '{point.key}' {point.count}\n" for point in points)
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text, errors="surrogateescape")
    return pathlib.Path(path)


def _tool(name):
    found = shutil.which(name)
    if found is None:
        package = "lcov" if name == "genhtml" else "verilator"
        raise UsageError(f"coverage needs {name}, which is not on PATH: install Debian's {package} "
                         f"(make coverage installs it when run as root)")
    return found


def _run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise UsageError(f"{' '.join(map(str, command[:3]))} ... failed: {(result.stderr or result.stdout).strip()[-400:]}")
    return result


def merge_dats(dats, out):
    """Merge Verilator ``coverage.dat`` files with ``verilator_coverage --write`` (counts of one point add up)."""
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _run([_tool("verilator_coverage"), "--write", str(out), *map(str, dats)])
    return out


def _write_info(points, dat, info):
    write_points(points, dat)
    _run([_tool("verilator_coverage"), "--write-info", str(info), str(dat)])
    return info


def lcov_lines(info):
    """``{source file: {line: count}}`` of the ``DA`` records of an lcov info file."""
    files, current = {}, None
    for line in pathlib.Path(info).read_text().splitlines():
        if line.startswith("SF:"):
            current = files.setdefault(line[3:], {})
        elif line.startswith("DA:") and current is not None:
            number, count = line[3:].split(",")[:2]
            current[int(number)] = current.get(int(number), 0) + int(count)
    return files


def _is_startup_trigger(point, sources):
    lines = sources.get(point.file)
    return lines is not None and 0 < point.line <= len(lines) and STARTUP_TRIGGER in lines[point.line - 1]


# --- Amaranth source locations -----------------------------------------------------------------------------

_SRC_ATTRIBUTE = re.compile(r'\(\* src = "([^"]*)" \*\) ?')
_ATTRIBUTE_LINE = re.compile(r'^\s*\(\* src = "[^"]*" \*\)\s*$')
_ASSIGNED = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$]*)\s*(\[.*\])?\s*<?=[^=]")
_REGISTER = re.compile(r"^\s*(\\\S+|[A-Za-z_][\w$]*)\s*<=\s*(\\\S+|[A-Za-z_][\w$]*)\s*;")
_DECLARED = re.compile(r"^\s*(?:input|output|inout|wire|reg)\b(?:\s+signed)?(?:\s*\[[^\]]*\])?\s+(\\\S+|[A-Za-z_][\w$]*)")


def _relative(location):
    path, _, line = location.rpartition(":")
    try:
        path = pathlib.Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        pass
    return f"{path}:{line}"


def source_locations(plain_text, src_text):
    """``{line of plain_text: "path:line"}``: the Amaranth source of each line, from ``src_text``'s ``src`` attributes.

    Parameters
    ----------
    plain_text : str
        Verilog written without ``src`` attributes (what the simulators ran).
    src_text : str
        The same design written with them (``amaranth.back.verilog.convert(..., emit_src=True)``).

    A line gets the attribute written just above it or in it; a line of a
    clocked process gets its process's; a line of an ``always @*`` block gets
    the location of the first signal the block assigns (the register it feeds,
    or the wire's own declaration). Empty when the two texts differ by more
    than their attributes.
    """
    plain = plain_text.splitlines()
    stripped, attributes, pending = [], [], []
    for line in src_text.splitlines():
        if _ATTRIBUTE_LINE.match(line):
            pending.extend(_SRC_ATTRIBUTE.findall(line))
            continue
        inline = _SRC_ATTRIBUTE.findall(line)
        stripped.append(_SRC_ATTRIBUTE.sub("", line))
        attributes.append(pending + inline)
        pending = []
    if stripped != plain:
        return {}
    own = {number: found[0] for number, found in enumerate(attributes, 1) if found}
    # A file holds a module per Amaranth submodule: signal names are looked up within their module.
    starts = [number for number, line in enumerate(plain, 1) if line.startswith("module ")] or [1]
    locations = {}
    for start, end in zip(starts, [*starts[1:], len(plain) + 1]):
        locations.update(_module_locations(plain, own, start, end))
    return {number: _relative(location) for number, location in locations.items()}


def _numbered(lines, start, end):
    return ((number, lines[number - 1]) for number in range(start, end))


def _module_locations(plain, own, start, end):
    """The locations of the lines ``start`` to ``end - 1`` (one module) of :func:`source_locations`."""
    # Signals' locations: their declaration's attribute, or for a process's variable the register it feeds.
    signal_source = {}
    for number, line in _numbered(plain, start, end):
        declared = _DECLARED.match(line)
        if declared and number in own:
            signal_source.setdefault(declared.group(1), own[number])
    for number, line in _numbered(plain, start, end):
        registered = _REGISTER.match(line)
        if registered and registered.group(1) in signal_source:
            signal_source.setdefault(registered.group(2), signal_source[registered.group(1)])
    locations = {}
    process_start, clocked_source, block = None, None, []
    for number, line in _numbered(plain, start, end):
        text = line.strip()
        if text.startswith("always @(posedge") or text.startswith("always @(negedge"):
            clocked_source = own.get(number)
            process_start = None
        elif text.startswith("always @*"):
            process_start, block, clocked_source = number, [], None
        if process_start is not None:
            block.append(number)
            if text == "end" and line.startswith("  end") and not line.startswith("   "):
                assigned = next((m.group(1) for m in map(_ASSIGNED.match, (plain[n - 1] for n in block[1:])) if m
                                 and STARTUP_TRIGGER not in m.group(0)), None)
                for inner in block:
                    if assigned in signal_source:
                        locations[inner] = signal_source[assigned]
                process_start = None
        elif clocked_source is not None and not text.startswith("always"):
            locations[number] = clocked_source
            clocked_source = None
        if number in own:
            locations[number] = own[number]
    # What is left (a memory's write process, say): the location of the signal the line assigns, or of the
    # signal the next assignment below it does (for an ``if`` that guards it).
    for number, line in _numbered(plain, start, end):
        if number in locations:
            continue
        for below in plain[number - 1:min(number + 2, end - 1)]:
            assigned = _ASSIGNED.match(below)
            if assigned and assigned.group(1) in signal_source:
                locations[number] = signal_source[assigned.group(1)]
                break
    return locations


def _amaranth_text(record):
    """The run's Verilog written again with ``src`` attributes, or ``None`` when the block cannot be rebuilt."""
    from amaranth.back import verilog

    from .hw.registry import get_block

    try:
        block = get_block(record["block"])
        return verilog.convert(block.component(**block.resolve(**record["params"])), name=record["block"],
                               emit_src=True)
    except Exception:  # noqa: BLE001 - the locations are a help; the coverage figures do not depend on them
        return None


# --- one block ---------------------------------------------------------------------------------------------

def runs_by_block(runs_root):
    """``{block: [(coverage.dat path, its run record)]}`` of the runs kept under ``runs_root``."""
    found = {}
    for dat in sorted(pathlib.Path(runs_root).glob("*/*.dat")):
        record_path = dat.with_suffix(".json")
        record = json.loads(record_path.read_text()) if record_path.exists() else {"block": dat.parent.name,
                                                                                   "params": None}
        found.setdefault(dat.parent.name, []).append((dat, record))
    return found


def _percent(hit, total):
    return round(100.0 * hit / total, 2) if total else None


def merge_block(block, runs, out_dir, html=True):
    """Merge one block's runs, write its lcov info (and HTML), and return its summary.

    Parameters
    ----------
    block : str
        The block's name.
    runs : list of (pathlib.Path, dict)
        Its runs' ``coverage.dat`` files with their run records (:func:`runs_by_block`).
    out_dir : pathlib.Path
        The block's folder: ``coverage.dat`` (merged), ``coverage.info`` (lines), ``toggle.info``, ``html/``.
    html : bool
        Write ``html/`` with ``genhtml``.

    Returns
    -------
    dict
        The block's summary (:func:`summarize`).
    """
    out_dir = pathlib.Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    merged = merge_dats([dat for dat, _ in runs], out_dir / "coverage.dat")
    points = read_points(merged)
    sources = {}
    for point in points:
        if point.file not in sources:
            try:
                sources[point.file] = pathlib.Path(point.file).read_text().splitlines()
            except OSError:
                sources[point.file] = None
    kept = [p for p in points if not _is_startup_trigger(p, sources)]
    line_points = [p for p in kept if p.page in LINE_PAGES]
    toggle_points = [p for p in kept if p.page in TOGGLE_PAGES]
    _write_info(line_points, out_dir / "lines.dat", out_dir / "coverage.info")
    _write_info(toggle_points, out_dir / "toggle.dat", out_dir / "toggle.info")
    records = {}
    for _, record in runs:
        if record.get("source"):
            records.setdefault(record["source"], record)
    summary = summarize(block, lcov_lines(out_dir / "coverage.info"), toggle_points, sources, records, len(runs))
    if html:
        result = subprocess.run([_tool("genhtml"), "--quiet", "--output-directory", str(out_dir / "html"),
                                 "--title", f"{block} (Verilator line coverage)", str(out_dir / "coverage.info")],
                                capture_output=True, text=True)
        summary["html"] = str((out_dir / "html" / "index.html").relative_to(out_dir.parent)) \
            if result.returncode == 0 else None
        if result.returncode != 0:
            summary["html_error"] = (result.stderr or result.stdout).strip()[-300:]
    return summary


def summarize(block, line_counts, toggle_points, sources, records, runs):
    """The summary of one block's merged coverage.

    Parameters
    ----------
    block : str
        The block's name.
    line_counts : dict
        ``{Verilog file: {line: count}}`` of its line points (:func:`lcov_lines`).
    toggle_points : list of Point
        Its toggle points.
    sources : dict
        ``{Verilog file: its lines, or None}``.
    records : dict
        ``{Verilog file: run record}`` (block, params).
    runs : int
        How many runs were merged.

    Returns
    -------
    dict
        ``block``, ``runs``, ``lines`` / ``lines_hit`` / ``line_percent``, ``toggles`` / ``toggles_hit`` /
        ``toggle_percent``, ``files`` (the same per parameter set) and ``uncovered`` (file, params, line,
        Verilog text, Amaranth source or ``None``).
    """
    files, uncovered = [], []
    toggles_by_file = {}
    for point in toggle_points:
        total, hit = toggles_by_file.get(point.file, (0, 0))
        toggles_by_file[point.file] = (total + 1, hit + (point.count > 0))
    for path in sorted(set(line_counts) | set(toggles_by_file)):
        counts = line_counts.get(path, {})
        record = records.get(path, {})
        lines = sources.get(path)
        locations = {}
        missed = sorted(number for number, count in counts.items() if count == 0)
        if missed and lines is not None and record.get("block"):
            src_text = _amaranth_text(record)
            if src_text is not None:
                locations = source_locations("\n".join(lines), src_text)
        for number in missed:
            uncovered.append({
                "file": _display(path), "params": record.get("params"), "line": number,
                "verilog": lines[number - 1].strip() if lines is not None and number <= len(lines) else None,
                "amaranth": locations.get(number)})
        toggles, toggles_hit = toggles_by_file.get(path, (0, 0))
        hit = sum(1 for count in counts.values() if count > 0)
        files.append({"file": _display(path), "params": record.get("params"), "lines": len(counts), "lines_hit": hit,
                      "line_percent": _percent(hit, len(counts)), "toggles": toggles, "toggles_hit": toggles_hit,
                      "toggle_percent": _percent(toggles_hit, toggles)})
    lines_total = sum(f["lines"] for f in files)
    lines_hit = sum(f["lines_hit"] for f in files)
    toggles = sum(f["toggles"] for f in files)
    toggles_hit = sum(f["toggles_hit"] for f in files)
    return {"block": block, "runs": runs, "lines": lines_total, "lines_hit": lines_hit,
            "line_percent": _percent(lines_hit, lines_total), "toggles": toggles, "toggles_hit": toggles_hit,
            "toggle_percent": _percent(toggles_hit, toggles), "files": files, "uncovered": uncovered}


def _display(path):
    try:
        return pathlib.Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def markdown(summaries, goal=95.0):
    """The Markdown summary: one row per block, then each block's uncovered lines."""
    lines = [f"Verilator line and toggle coverage over `make test`'s Verilator runs, merged per block "
             f"(goal: {goal:g} % of lines). Lines of Amaranth's start-up trigger are left out "
             f"(`trainforge.coverage`).", "",
             "| block | runs | lines | line % | toggle bits | toggle % | uncovered lines | HTML |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for s in summaries:
        flag = "" if s["line_percent"] is None or s["line_percent"] >= goal else " (below goal)"
        html = f"[{s['block']}/html]({s['html']})" if s.get("html") else ""
        lines.append(f"| {s['block']} | {s['runs']} | {s['lines_hit']}/{s['lines']} | {number(s['line_percent'])}"
                     f"{flag} | {s['toggles_hit']}/{s['toggles']} | {number(s['toggle_percent'])} | "
                     f"{len(s['uncovered'])} | {html} |")
    for s in summaries:
        if not s["uncovered"]:
            continue
        lines += ["", f"#### {s['block']}: uncovered lines by Amaranth source", "",
                  "| Amaranth source | uncovered Verilog lines |", "|---|---:|"]
        lines += [f"| {source or 'not located'} | {count} |" for source, count in by_source(s["uncovered"])]
        lines += ["", f"#### {s['block']}: uncovered lines", "",
                  "| Verilog | line | text | Amaranth source | parameters |", "|---|---:|---|---|---|"]
        for row in s["uncovered"]:
            params = ", ".join(f"{k}={v}" for k, v in sorted((row["params"] or {}).items())) or "defaults"
            text = (row["verilog"] or "").replace("|", "\\|").replace("`", "'")
            lines.append(f"| {pathlib.PurePath(row['file']).name} | {row['line']} | `{text}` | "
                         f"{row['amaranth'] or ''} | {params} |")
    return "\n".join(lines) + "\n"


def by_source(uncovered):
    """``[(Amaranth source or None, how many uncovered lines)]``, the most first."""
    counts = {}
    for row in uncovered:
        counts[row["amaranth"]] = counts.get(row["amaranth"], 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0] or ""))


def number(value):
    return "" if value is None else f"{value:.1f}"
