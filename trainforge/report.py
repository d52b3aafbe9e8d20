"""``trainforge report``: ``build/reports/index.md``, a readable summary of every report under build/reports/.

Per family (one folder of build/reports/; the hardware flow's synth, fpga and
bench reports form one section of their own), the index has

1. a table of the paper's figures against ours, with the deviation
   ``ours / paper - 1`` in percent and a link to the family README section
   that explains the figures and their deviations;
2. a table of the main figures that have no paper value;
3. the plots (PNG files) as Markdown images;
4. the JSON reports, each with its kind and whether it matches its schema
   (:mod:`trainforge.schemas`; "not checked" when ``jsonschema`` is not installed),
   and the Markdown tables written beside them (``qor.md``) inlined.

Each report kind has one function below that picks its figures (:data:`_FIGURES`);
a JSON file of no known kind is listed without figures.
"""
import json
import math
import os
import pathlib
import re

from .outputs import write_text

__all__ = ["write_index", "figures", "deviation"]

#: Where each report kind's figures are explained: (README path from the source root, heading text it contains).
SECTIONS = {
    "synth": ("README.md", "Other targets"),
    "fpga": ("README.md", "Other targets"),
    "bench": ("README.md", "Other targets"),
    "tensordash_speedup": ("hw/tensordash/README.md", "Speedups"),
    "tensordash_training": ("hw/tensordash/README.md", "Real tensors"),
    "tensordash_rtl_check": ("hw/tensordash/README.md", "trainforge tensordash rtl-check"),
    "tensordash_area": ("hw/tensordash/README.md", "Area overhead"),
    "neurotrainer_lut_error": ("hw/neurotrainer/README.md", "Interpolation error"),
    "neurotrainer_area": ("hw/neurotrainer/README.md", "Area of the MAC variants"),
    "neurotrainer_alexnet": ("hw/neurotrainer/README.md", "AlexNet, minibatch"),
    "neurotrainer_scaling": ("hw/neurotrainer/README.md", "Multi-module scaling"),
    "neurotrainer_training": ("hw/neurotrainer/README.md", "Fig. 10 comparison"),
    "caterpillar_table2": ("hw/caterpillar/README.md", "Figures:"),
    "caterpillar_utilization": ("hw/caterpillar/README.md", "Figures:"),
    "caterpillar_rates": ("hw/caterpillar/README.md", "Training-method study"),
    "caterpillar_study": ("hw/caterpillar/README.md", "Training-method study"),
    "hypar_nodes": ("sim/hypar/README.md", "Node models"),
    "hypar_third_type": ("sim/hypar/README.md", "third partition type"),
    "hypar": ("sim/hypar/README.md", "Paper vs ours"),
    "dsm_sweep": ("sim/dsm/README.md", "Paper vs ours"),
    "coverage": ("README.md", "Coverage"),
    "regress": ("README.md", "Random regression"),
}

#: Reports that have no schema yet, by the tail of their path, and their kind.
UNSCHEMED_KINDS = {"regress/summary.json": "regress"}

_SOURCE_ROOT = pathlib.Path(__file__).resolve().parent.parent
_HARDWARE_FLOW = "hardware flow"


def deviation(ours, paper):
    """``ours / paper - 1`` as text in percent; a paper range ``[low, high]`` counts 0 inside it, else the nearest end.

    Empty when either is not a number or the paper's value is 0.
    """
    if isinstance(paper, (list, tuple)) and len(paper) == 2 and all(_is_number(v) for v in paper):
        low, high = sorted(paper)
        if _is_number(ours) and low <= ours <= high:
            return "within"
        paper = low if _is_number(ours) and ours < low else high
    if not (_is_number(ours) and _is_number(paper)) or paper == 0:
        return ""
    return f"{(ours / paper - 1) * 100:+.1f} %"


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value):
        return f"{value[0]:.4g} to {value[1]:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


# --- figures of each report kind: (quantity, paper value or None, our value) ---------------------------------

def _synth(r):
    return [(f"{b['block']} cells", None, b.get("cells", b.get("reason"))) for b in r["blocks"]]


def _fpga(r):
    rows = []
    for b in r["blocks"]:
        if b.get("status") != "ok":
            rows.append((f"{b['block']}", None, f"failed: {b.get('reason')}"))
            continue
        rows += [(f"{b['block']} LUT4", None, b["lut4"]), (f"{b['block']} FF (block)", None, b["ff_block"]),
                 (f"{b['block']} Fmax (MHz)", None, b["fmax_mhz"])]
    return rows


def _bench(r):
    return [(f"{b['name']} median (s)", None, b["median_s"]) for b in r["benchmarks"]]


def _tensordash_speedup(r):
    rows = [(f"4x4 tile speedup at sparsity {p['sparsity']:g}", p.get("paper_tile"), p["tile_4x4"])
            for p in r["random_sparsity"]]
    rows += [(f"4x4 tile speedup, depth {p['depth']}", None, p["tile_4x4"]) for p in r["depth"]]
    return rows


def _tensordash_training(r):
    return [("overall speedup (paper: Fig. 8 average over its models)", r["paper"]["fig8_average_speedup"],
             r["overall_speedup"])] + [(f"{op} speedup", None, v) for op, v in r["by_operation"].items()]


def _tensordash_rtl_check(r):
    return [(f"{row['operation']} cycles, RTL (golden)", row["golden_cycles"], row["rtl_cycles"]) for row in r["rows"]]


def _tensordash_area(r):
    rows = [("td_pe / dense_pe area (ours: Yosys cells)", r["paper_ratio"], r["synth"]["cell_ratio"])]
    if "tile" in r:
        rows.append((f"td_tile {r['tile']['rows']}x{r['tile']['cols']} / dense PEs (cells)", r["paper_ratio"],
                     r["tile"]["cell_ratio"]))
    if "fpga" in r:
        rows.append(("td_pe / dense_pe LUT4 on the ECP5", r["paper_ratio"], r["fpga"].get("lut4_ratio")))
    return rows


def _neurotrainer_lut_error(r):
    return [(f"{row['function']}, {row['table_bits']} address bits: max error (LSB)", None, row["max_error_lsb"])
            for row in r["rows"]]


def _neurotrainer_area(r):
    return [(f"{row['rounding']} / {r['reference'].split()[0]} area (ours: cells)", row.get("paper_ratio"),
             row["cell_ratio"]) for row in r["variants"]]


def _neurotrainer_alexnet(r):
    paper, totals = r["paper"], r["totals"]
    rows = [(f"{row['layer']} {row['pass'].upper()} TOPS", row.get("paper_tops"), row["tops"]) for row in r["rows"]]
    rows += [("inference ms per image", paper["inference_ms_per_image"], totals["inference_s_per_image"] * 1e3),
             ("training ms per image", paper["training_ms_per_image"], totals["training_s_per_image"] * 1e3)]
    return rows


def _neurotrainer_scaling(r):
    ours, paper = r["alexnet_4_modules_k1"]["ours"], r["alexnet_4_modules_k1"]["paper"]
    rows = [(f"AlexNet, 4 modules, K1: {key}", paper.get(key), value) for key, value in ours.items()]
    for name, curve in r["curves"].items():
        last = curve["points"][-1]
        rows.append((f"{r['network']}, {curve['central_unit']}, {last['modules']} modules: images/s", None,
                     last["images_per_s"]))
    return rows


def _neurotrainer_training(r):
    return [(f"{row['network']} {row['rounding']}"
             + (f" F={row['frac_bits']}" if row["frac_bits"] is not None else "") + ": final accuracy",
             None, row["final_accuracy_mean"]) for row in r["results"]]


def _caterpillar_table2(r):
    rows = [(f"{row['network']} on {row['config']}, {row['method']} b={row['batch']}: GFLOPS/W",
             row["paper_gflops_per_w"], row["gflops_per_w"]) for row in r["rows"]]
    rows += [(f"{config} area (mm^2)", area["paper_mm2"], area["ours_mm2"]) for config, area in r["areas"].items()]
    return rows


def _caterpillar_utilization(r):
    return [(f"GEMV {r['m']}x{r['n']}, n_r={row['n_r']}, {row['reduction']}"
             + (", overlapped" if row["overlap"] else "") + ": utilization", None, row["utilization"])
            for row in r["rows"]]


def _caterpillar_rates(r):
    return [(f"{method}: best rate (mean accuracy {best['mean_accuracy']:.3f})", None, best["rate"])
            for method, best in r["best"].items()]


def _caterpillar_study(r):
    return [(f"{run['network']} {run['method']} b={run['batch']}: final accuracy", None, run["accuracy"][-1])
            for run in r["runs"]]


def _hypar_fig5(r):
    return [(f"{network}: model-parallel layers per level", None, " ".join(net["levels"]))
            for network, net in r["ours"].items()]


def _hypar_fig6_7(r):
    hypar = r["columns"].index("HyPar")
    mp = r["columns"].index("MP") if "MP" in r["columns"] else None
    paper = r["paper"]
    rows = []
    for figure, key in (("fig6", "performance"), ("fig7", "energy_efficiency")):
        values = r[key]
        rows.append((f"{figure}: HyPar {key.replace('_', ' ')}, Gmean", paper.get(f"{figure}_hypar_gmean"),
                     values["Gmean"][hypar]))
        rows.append((f"{figure}: HyPar {key.replace('_', ' ')}, SFC", paper.get(f"{figure}_sfc_hypar"),
                     values["SFC"][hypar]))
        if mp is not None:
            rows.append((f"{figure}: MP {key.replace('_', ' ')}, SFC", paper.get(f"{figure}_sfc_mp"), values["SFC"][mp]))
    for paper_key, network in (("fig6_lenet_c_hypar", "Lenet-c"), ("fig6_vgg_a_hypar", "VGG-A")):
        if paper_key in paper and network in r["performance"]:
            rows.append((f"fig6: HyPar performance, {network}", paper[paper_key], r["performance"][network][hypar]))
    return rows


def _hypar_fig8(r):
    return [(f"{network}, {column} ({r['unit']})", r["paper"].get(network, [None] * len(values))[i], value)
            for network, values in r["ours"].items() for i, (column, value) in enumerate(zip(r["columns"], values))]


def _hypar_grid(r):
    rows = [("HyPar performance", r["paper"].get("hypar", r["paper"]).get("performance"), r["ours"]["hypar"]["performance"])]
    rows.append(("peak performance", r["paper"].get("peak", {}).get("performance"), r["ours"]["peak"]["performance"]))
    return rows


def _hypar_fig11(r):
    return [(f"{point['accelerators']} accelerators: {name} performance gain", None, point[name]["performance_gain"])
            for point in r["ours"] for name in ("DP", "HyPar")]


def _hypar_fig12(r):
    rows = [(f"Gmean on the {topology}", value, r["ours"]["Gmean"][topology])
            for topology, value in r["paper"]["Gmean"].items()]
    rows += [(f"{network} on the {topology}", None, value) for network, by in r["ours"].items() if network != "Gmean"
             for topology, value in by.items()]
    return rows


def _hypar_fig13(r):
    paper, ours = r["paper"], r["ours_summary"]
    return [("HyPar over the trick: mean performance", paper["hypar_over_trick_performance_mean"], ours["performance_mean"]),
            ("HyPar over the trick: mean energy efficiency", paper["hypar_over_trick_energy_mean"], ours["energy_mean"]),
            ("HyPar over the trick: max performance", paper["hypar_over_trick_performance_max"], ours["performance_max"])]


def _hypar_nodes(r):
    return [(f"{network}, {node} node: HyPar over DP", None, figures["speedup"])
            for network, by in r["ours"].items() for node, figures in by.items()]


def _hypar_third_type(r):
    return [(f"Gmean of the ten, {label}: {key.replace('_', ' ')} over DP", None, value)
            for label, gains in r["Gmean"].items() for key, value in gains.items()]


def _coverage(r):
    rows = []
    for b in r["blocks"]:
        rows += [(f"{b['block']} line coverage (%)", None, b["line_percent"]),
                 (f"{b['block']} toggle coverage (%)", None, b["toggle_percent"])]
    return rows


def _regress(r):
    rows = []
    for row in r["rows"]:
        where = f"{row['block']} on {row['simulator']} ({row.get('path', 'cocotb')} path)"
        rows += [(f"{where}: transactions", None, row["transactions"]),
                 (f"{where}: mismatches", None, row["mismatches"])]
    return rows


def _dsm_sweep(r):
    rows = []
    for network, summary in r.get("summary", {}).items():
        for key, value in summary.items():
            if not key.startswith("paper_"):
                rows.append((f"{network}: {key.replace('_', ' ')}", summary.get(f"paper_{key}"), value))
    if not rows:
        rows = [(f"{p['network']} " + ", ".join(f"{k}={p[k]}" for k in p if k not in ("network", "utilization")
                                                 and isinstance(p[k], int) and not isinstance(p[k], bool))
                 + ": utilization", None, p.get("utilization")) for p in r.get("points", [])]
    return rows


_FIGURES = {
    "synth": _synth, "fpga": _fpga, "bench": _bench,
    "tensordash_speedup": _tensordash_speedup, "tensordash_training": _tensordash_training,
    "tensordash_rtl_check": _tensordash_rtl_check, "tensordash_area": _tensordash_area,
    "neurotrainer_lut_error": _neurotrainer_lut_error, "neurotrainer_area": _neurotrainer_area,
    "neurotrainer_alexnet": _neurotrainer_alexnet, "neurotrainer_scaling": _neurotrainer_scaling,
    "neurotrainer_training": _neurotrainer_training,
    "caterpillar_table2": _caterpillar_table2, "caterpillar_utilization": _caterpillar_utilization,
    "caterpillar_rates": _caterpillar_rates, "caterpillar_study": _caterpillar_study,
    "hypar_fig5": _hypar_fig5, "hypar_fig6_7": _hypar_fig6_7, "hypar_fig8": _hypar_fig8, "hypar_fig9": _hypar_grid,
    "hypar_fig10": _hypar_grid, "hypar_fig11": _hypar_fig11, "hypar_fig12": _hypar_fig12, "hypar_fig13": _hypar_fig13,
    "hypar_nodes": _hypar_nodes, "hypar_third_type": _hypar_third_type, "dsm_sweep": _dsm_sweep,
    "coverage": _coverage, "regress": _regress,
}


def figures(kind, report):
    """The figures of a report of ``kind``: ``[(quantity, paper value or None, our value)]``; ``[]`` for no known kind."""
    pick = _FIGURES.get(kind)
    return pick(report) if pick else []


# --- links ----------------------------------------------------------------------------------------------------

def _slug(heading):
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _section_link(kind, reports, root):
    """``[title](relative/README.md#anchor)`` of the README section that explains ``kind``, or ``""``."""
    where = SECTIONS.get(kind) or SECTIONS.get(kind.split("_")[0])
    if where is None:
        return ""
    readme = root / where[0]
    try:
        lines = readme.read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        if line.startswith("#") and where[1] in line:
            heading = line.lstrip("#").strip()
            target = pathlib.Path(os.path.relpath(readme, reports)).as_posix()
            title = re.sub(r"[`\[\]|]", "", heading)
            title = title if len(title) <= 40 else title[:37].rstrip() + "..."
            return f"[{title}]({target}#{_slug(heading)})"
    return ""


# --- the index ------------------------------------------------------------------------------------------------

def _kind_of(path):
    from .schemas import kind_of

    kind = kind_of(path)
    if kind is None:
        kind = UNSCHEMED_KINDS.get("/".join(pathlib.PurePath(path).parts[-2:]))
    return kind


def _schema_status(path, kind):
    if kind is None or kind in UNSCHEMED_KINDS.values():
        return "no schema"
    try:
        from .schemas import validate

        found = validate(path, kind)
    except ImportError:
        return "schema not checked (jsonschema not installed)"
    if not found:
        return "matches its schema"
    return f"DOES NOT match its schema ({len(found)} errors, first: {found[0]})"


def _natural(path):
    """Sort key: fig5 before fig10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path.as_posix())]


def _family_of(path, reports):
    parts = path.relative_to(reports).parts
    return parts[0] if len(parts) > 1 else _HARDWARE_FLOW


def _links_from(table, reports):
    """``table``'s Markdown text, its relative links rewritten to hold from ``reports`` (where the index is)."""
    folder = table.parent.relative_to(reports).as_posix()
    text = table.read_text().strip()
    if folder == ".":
        return text
    return re.sub(r"\]\((?![a-z]+:|/|#)([^)\s]+)\)", lambda match: f"]({folder}/{match.group(1)})", text)


def _family_section(family, files, reports, root):
    compared, plain, listed = [], [], []
    for path in (p for p in files if p.suffix == ".json"):
        relative = path.relative_to(reports).as_posix()
        kind = _kind_of(path)
        try:
            report = json.loads(path.read_text())
            rows = figures(kind, report) if isinstance(report, dict) else []
            status = _schema_status(path, kind)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            rows, status = [], f"unreadable ({type(error).__name__}: {error})"
        link = _section_link(kind, reports, root) if kind else ""
        source = f"[{path.name}]({relative})"
        for quantity, paper, ours in rows:
            if paper is None:
                plain.append(f"| {source} | {_text(quantity)} | {_text(ours)} | {link} |")
            else:
                compared.append(f"| {source} | {_text(quantity)} | {_text(paper)} | {_text(ours)} | "
                                f"{deviation(ours, paper)} | {link} |")
        listed.append(f"- [{relative}]({relative}): {kind or 'unknown kind'}, {status}")
    lines = [f"## {family}", ""]
    if compared:
        lines += ["### Paper against ours", "", "Deviation: ours / paper - 1; for a paper range, 'within' or against "
                  "its nearest end.", "",
                  "| report | figure | paper | ours | deviation | explained in |",
                  "|---|---|---:|---:|---:|---|", *compared, ""]
    if plain:
        lines += ["### Figures without a paper value" if compared else "### Figures", "",
                  "| report | figure | ours | explained in |", "|---|---|---:|---|", *plain, ""]
    plots = [p for p in files if p.suffix == ".png"]
    if plots:
        lines += ["### Plots", ""]
        for plot in plots:
            relative = plot.relative_to(reports).as_posix()
            lines += [f"![{relative}]({relative})", ""]
    tables = [p for p in files if p.suffix == ".md"]
    for table in tables:
        lines += [f"### {table.relative_to(reports).as_posix()}", "", _links_from(table, reports), ""]
    if listed:
        lines += ["### Reports", "", *listed, ""]
    return lines


def _in_genhtml_output(path, reports):
    """Whether ``path`` is part of a genhtml HTML report (a folder with genhtml's ``gcov.css``), not a report of its own."""
    for folder in path.parents:
        if folder == reports or reports not in folder.parents:
            return False
        if (folder / "gcov.css").exists():
            return True
    return False


def write_index(reports, source_root=None):
    """Write ``reports/index.md``: per family, paper against ours, the other figures, the plots, the reports.

    Parameters
    ----------
    reports : str or pathlib.Path
        The reports folder (``build/reports``).
    source_root : pathlib.Path, optional
        The source checkout whose README files the index links to (default: the one this module is in).

    Returns
    -------
    pathlib.Path
        The index written.
    """
    reports = pathlib.Path(reports)
    reports.mkdir(parents=True, exist_ok=True)
    root = pathlib.Path(source_root) if source_root is not None else _SOURCE_ROOT
    index = reports / "index.md"
    files = sorted((p for p in reports.rglob("*") if p.is_file() and p != index
                    and p.suffix in (".md", ".png", ".json") and not p.name.startswith(".")
                    and not _in_genhtml_output(p, reports)), key=_natural)
    families = sorted({_family_of(p, reports) for p in files}, key=lambda f: (f != _HARDWARE_FLOW, f))
    lines = ["# trainforge reports", "",
             "Generated by `make report` (`trainforge report`) from the files under this folder: per family, the "
             "paper's figures against ours with the deviation and the README section that explains it, the other "
             "main figures, the plots and the JSON reports.", ""]
    if not files:
        lines.append("No reports yet: run `make synth`, `make fpga`, `make bench` or a figure command first.")
    else:
        lines += ["Families: " + ", ".join(f"[{f}](#{_slug(f)})" for f in families), ""]
    for family in families:
        lines += _family_section(family, [p for p in files if _family_of(p, reports) == family], reports, root)
    write_text(index, "\n".join(lines).rstrip() + "\n")
    return index
