"""Speedup studies of TensorDash from the golden cycle model (synthetic sparsity: no training traces offline).

Sparsity model (synthetic, stated as such in every report): each B operand
(the targeted operand: activations or gradients) is zero independently with
probability ``sparsity`` (Fig. 15's random tensors). ``"clustered"`` draws a
density per PE row (feature map) uniformly in ``[0, 2 * (1 - sparsity)]``
(capped at 1) to model the clustering of non-zeros in some feature maps that
the paper gives as the cause of row imbalance (Section IV-D, Fig. 13).
Each sample is one long dot product of ``stream_rows`` rows per PE row;
speedup = dense cycles (one row per cycle) / TensorDash cycles, averaged over samples.
"""
import numpy as np

from trainforge.golden.tensordash.core import pad_rows, run_cores
from trainforge.spec.tensordash import resolve_pattern
from trainforge.outputs import save_figure
from trainforge.progress import progress

__all__ = ["random_stream", "speedup", "ideal", "PAPER_FIG15", "PAPER_FIG12", "PAPER_FIG13", "PAPER_FIG14",
           "random_sparsity", "depth_sweep", "rows_sweep",
           "wide_pe", "all_figures", "plot"]

#: Fig. 15 values quoted in the paper's text (accelerator of 4x4 tiles, 4-deep buffers).
PAPER_FIG15 = {0.2: 1.23, 0.9: 3.7, 0.99: 3.99}


def random_stream(sparsity, *, rows=4, lanes=4, depth=4, samples=64, stream_rows=512, model="random", seed=0):
    """The effectual B operands of ``samples`` dot products of one ``rows``-row tile (the sparsity model above).

    Returns
    -------
    effectual : ndarray of bool, shape (samples, rows, T, lanes)
        ``T`` = ``stream_rows`` padded to whole groups of ``depth`` rows.
    clear, read : ndarray of bool, shape (T,)
        One dot product per sample: ``clear`` on its first row, ``read`` on its last.
    """
    generator = np.random.default_rng(seed)
    total = pad_rows(stream_rows, depth)
    if model == "clustered":
        density = np.minimum(1.0, generator.random((samples, rows, 1, 1)) * 2 * (1 - sparsity))
    else:
        density = np.full((samples, rows, 1, 1), 1 - sparsity)
    effectual = generator.random((samples, rows, total, lanes)) < density
    clear, read = np.zeros(total, bool), np.zeros(total, bool)
    clear[0], read[-1] = True, True
    return effectual, clear, read


def speedup(sparsity, *, rows=4, lanes=4, depth=4, pattern="default", samples=64, stream_rows=512,
            model="random", seed=0):
    """Mean speedup of a ``rows``-row tile (rows=1: a PE) over the dense one at the given sparsity."""
    effectual, clear, read = random_stream(sparsity, rows=rows, lanes=lanes, depth=depth, samples=samples,
                                           stream_rows=stream_rows, model=model, seed=seed)
    run = run_cores(effectual, read, clear, resolve_pattern(pattern, lanes, depth), depth)
    return float(np.mean(len(read) / run.cycles))


def ideal(sparsity, depth):
    """The ideal bound min(D, 1 / (1 - sparsity))."""
    return min(depth, 1 / max(1 - sparsity, 1e-12))


def random_sparsity(levels=(0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.9999), **kwargs):
    return [{"sparsity": s, "pe": speedup(s, rows=1, **kwargs), "tile_4x4": speedup(s, rows=4, **kwargs),
             "ideal": ideal(s, 4), "paper_tile": PAPER_FIG15.get(s)} for s in levels]


def depth_sweep(sparsity=0.62, **kwargs):
    """Fig. 12 analogue; 0.62 sparsity is the paper's average potential of 2.6x (Fig. 1)."""
    return [{"depth": d, "tile_4x4": speedup(sparsity, rows=4, depth=d, **kwargs), "ideal": ideal(sparsity, d)}
            for d in (2, 3, 4, 5)]


def rows_sweep(sparsity=0.62, **kwargs):
    """Fig. 13 analogue: rows 1..16, 4 columns, random and clustered sparsity."""
    return [{"rows": r, "random": speedup(sparsity, rows=r, **kwargs),
             "clustered": speedup(sparsity, rows=r, model="clustered", **kwargs)} for r in (1, 2, 4, 8, 16)]


def wide_pe(levels=(0.3, 0.5, 0.62, 0.8, 0.9), **kwargs):
    """Fig. 14 analogue: 16-lane 3-deep tile against the 4-lane 4-deep tile."""
    return [{"sparsity": s, "lanes16_depth3": speedup(s, rows=4, lanes=16, depth=3, **kwargs),
             "lanes4_depth4": speedup(s, rows=4, **kwargs), "ideal_depth3": ideal(s, 3)} for s in levels]


def all_figures(samples=64, stream_rows=512):
    kwargs = {"samples": samples, "stream_rows": stream_rows}
    sweeps = {"random_sparsity": random_sparsity, "depth": depth_sweep, "rows": rows_sweep, "wide_pe": wide_pe}
    report = {"sparsity_model": "synthetic: i.i.d. zeros in the targeted (B) operand; 'clustered' = per-row density"}
    for name, sweep in progress(list(sweeps.items()), "speedup figures", unit="figure"):
        report[name] = sweep(**kwargs)
    return report


def _plot_rtl(axes, report, figure, colors, scale=1):
    """Markers of the RTL points of ``figure`` (``report["rtl"]``) beside the golden curves, in their colors."""
    rtl = report.get("rtl")
    if not rtl:
        return
    for series in dict.fromkeys(p["series"] for p in rtl["points"] if p["figure"] == figure):
        points = [p for p in rtl["points"] if p["figure"] == figure and p["series"] == series
                  and p["rtl_speedup"] is not None]
        axes.plot([p["x"] * scale for p in points], [p["rtl_speedup"] for p in points], linestyle="none",
                  marker="x", markersize=9, color=colors.get(series, "red"),
                  label=f"{series} RTL ({rtl['simulator']}, {rtl['samples']}x{rtl['stream_rows']} rows)")


#: Fig. 12 values quoted in the paper's text: average speedup over its models, 2-deep and 5-deep staging buffers.
PAPER_FIG12 = {2: 1.5, 5: 2.05}
#: Fig. 13 values quoted in the paper's text: average speedup over its models, 1 and 16 PE rows (4 columns).
PAPER_FIG13 = {1: 2.2, 16: 1.8}
#: Fig. 14 value quoted in the paper's text: average speedup over its models of 16-lane PEs with 3-deep buffers.
PAPER_FIG14 = 1.85



def _finish(axes, title, xlabel, ylabel, caption):
    """Title, axis labels (``ylabel`` names the baseline of the speedup), legend and a caption below the axes."""
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel, fontsize=9)
    axes.legend(fontsize="small")
    axes.grid(alpha=0.3)
    axes.figure.text(0.01, 0.01, caption, fontsize=7, va="bottom", wrap=True)
    axes.figure.tight_layout(rect=(0, 0.1, 1, 1))


def plot(report, directory):
    """PNG plots of :func:`all_figures` into ``directory``, with the RTL points of ``report["rtl"]`` if present.

    Each plot names the paper figure it reproduces and shows the paper's numbers quoted
    in its text (the paper's own values are averages over its models' traces; ours use
    synthetic sparsity, see the module docstring). Returns the file names.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    synthetic = "ours: synthetic sparsity, i.i.d. zeros in the B operand"

    rows = report["random_sparsity"]
    figure, axes = plt.subplots(figsize=(7, 5))
    x = [r["sparsity"] * 100 for r in rows]
    colors = {}
    for key, label in (("pe", "ours: one PE, 4 lanes, 4 deep"), ("tile_4x4", "ours: 4x4 tile, 4 lanes, 4 deep"),
                       ("ideal", "ideal min(4, 1/(1-s))")):
        colors[key] = axes.plot(x, [r[key] for r in rows], marker="o", label=label)[0].get_color()
    axes.plot([s * 100 for s in PAPER_FIG15], list(PAPER_FIG15.values()), "k*", markersize=11,
              label="paper Fig. 15 (text: 20%, 90%, 99%)")
    _plot_rtl(axes, report, "random_sparsity", colors, scale=100)
    _finish(axes, "TensorDash Fig. 15: speedup for randomly sparse tensors", "sparsity of the B operand (%)",
            "speedup over the dense PE / 4x4 tile (x)",
            f"{synthetic}; paper: SQZNet conv3 shape with random values, 4x4 tiles, 4-deep buffers;"
            " the paper quotes 1.23x at 20%, 3.7x at 90%, 3.99x at 99% sparsity")
    save_figure(figure, directory / "random_sparsity.png")
    files.append("random_sparsity.png")

    figure, axes = plt.subplots(figsize=(7, 5))
    rows = report["depth"]
    colors = {"tile_4x4": axes.plot([r["depth"] for r in rows], [r["tile_4x4"] for r in rows], marker="o",
                                    label="ours: 4x4 tile, 4 lanes, 62% sparsity")[0].get_color(),
              "ideal": axes.plot([r["depth"] for r in rows], [r["ideal"] for r in rows], marker="o",
                                 label="ideal min(depth, 1/(1-s))")[0].get_color()}
    axes.plot(list(PAPER_FIG12), list(PAPER_FIG12.values()), "k*", markersize=11,
              label="paper Fig. 12: average over its models (text)")
    _plot_rtl(axes, report, "depth", colors)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    _finish(axes, "TensorDash Fig. 12: speedup against staging buffer depth", "staging buffer depth (rows)",
            "speedup over the dense 4x4 tile (x)",
            f"{synthetic} at 62% sparsity (the paper's average potential 2.6x, Fig. 1); the paper quotes only"
            " its average over real training traces: 1.5x at depth 2 and 2.05x at depth 5")
    save_figure(figure, directory / "depth.png")
    files.append("depth.png")

    figure, axes = plt.subplots(figsize=(7, 5))
    rows = report["rows"]
    colors = {}
    for key, label in (("random", "ours: random sparsity"), ("clustered", "ours: clustered (per-row density)")):
        colors[key] = axes.plot([r["rows"] for r in rows], [r[key] for r in rows], marker="o",
                                label=label)[0].get_color()
    axes.plot(list(PAPER_FIG13), list(PAPER_FIG13.values()), "k*", markersize=11,
              label="paper Fig. 13: average over its models (text)")
    _plot_rtl(axes, report, "rows", colors)
    axes.set_xscale("log", base=2)
    axes.set_xticks([r["rows"] for r in rows], [str(r["rows"]) for r in rows])
    _finish(axes, "TensorDash Fig. 13: speedup against PE rows per tile (4 columns)", "PE rows per tile",
            "speedup over the dense tile of as many rows (x)",
            f"{synthetic} at 62% sparsity, 4 lanes, 4 deep; the paper quotes only its average over real"
            " training traces: 2.2x with 1 row and 1.8x with 16 rows")
    save_figure(figure, directory / "rows.png")
    files.append("rows.png")

    figure, axes = plt.subplots(figsize=(7, 5))
    rows = report["wide_pe"]
    x = [r["sparsity"] * 100 for r in rows]
    colors = {}
    for key, label in (("lanes16_depth3", "ours: 4x4 tile, 16 lanes, 3 deep"),
                       ("lanes4_depth4", "ours: 4x4 tile, 4 lanes, 4 deep"),
                       ("ideal_depth3", "ideal min(3, 1/(1-s))")):
        colors[key] = axes.plot(x, [r[key] for r in rows], marker="o", label=label)[0].get_color()
    axes.axhline(PAPER_FIG14, color="k", linestyle="--", linewidth=1,
                 label=f"paper Fig. 14: {PAPER_FIG14}x, 16 lanes 3 deep, average over its models (text)")
    _plot_rtl(axes, report, "wide_pe", colors, scale=100)
    _finish(axes, "TensorDash Fig. 14: 16-lane PEs with 3-deep buffers", "sparsity of the B operand (%)",
            "speedup over the dense 4x4 tile of as many lanes (x)",
            f"{synthetic}; each configuration against the dense tile of its own lanes; the paper gives only"
            " its average over real training traces (1.85x), not a value per sparsity")
    save_figure(figure, directory / "wide_pe.png")
    files.append("wide_pe.png")
    plt.close("all")
    return files
