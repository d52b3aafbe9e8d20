"""``trainforge neurotrainer alexnet`` and ``scaling``: the module throughput model's figures (Figs. 13, 17)."""

from trainforge.errors import UsageError

from trainforge.commands.neurotrainer.reports import REPORTS, int_list, save_report
from trainforge.outputs import save_figure

def _batch(text):
    values = int_list(text, "--batch", 1, 4096)
    if len(values) != 1:
        raise UsageError(f"--batch = {text!r} is not one integer")
    return values[0]


def _fmt_paper(value):
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"{value[0]:.1f}-{value[1]:.1f}"
    return f"{value:.2f}"


def _top_losses(fractions, count=2):
    named = sorted(((v, k) for k, v in fractions.items() if k != "compute at peak"), reverse=True)[:count]
    return "; ".join(f"{k} {v:.0%}" for v, k in named if v >= 0.005) or "-"


def _alexnet(args):
    from trainforge.sim.neurotrainer.system_report import PAPER, network_report
    batch = _batch(args.batch)
    report = network_report("alexnet", batch)
    report["paper"] = PAPER
    path, plot = save_report(args, "alexnet", report, _plot_alexnet)
    if args.json:
        return 0
    print(f"AlexNet on one NeuroTrainer module, minibatch {batch} (FF 16-bit, BP/UP 32-bit SR-LO); "
          "latency per image = minibatch latency / batch")
    print(f"{'layer':<6}{'pass':<5}{'bits':>5}{'us/img':>9}{'TOPS':>7}{'paper':>9}{'util':>6}  "
          f"{'bound':<16}largest losses")
    for row in report["rows"]:
        print(f"{row['layer']:<6}{row['pass']:<5}{row['bits']:>5}{row['seconds_per_image'] * 1e6:>9.2f}"
              f"{row['tops']:>7.2f}{_fmt_paper(row['paper_tops']):>9}{row['utilization']:>6.0%}  "
              f"{row['bound']:<16}{_top_losses(row['loss_fractions'])}")
    totals = report["totals"]
    print(f"inference {totals['inference_s_per_image'] * 1e3:.3f} ms/image (paper {PAPER['inference_ms_per_image']}), "
          f"training {totals['training_s_per_image'] * 1e3:.3f} ms/image (paper {PAPER['training_ms_per_image']}, "
          f"which also counts its data-preparation passes), {totals['training_tops']:.2f} TOPS over training")
    print(f"wrote {path} and {plot}")
    return 0


def _plot_alexnet(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = report["rows"]
    labels = [f"{r['layer']}\n{r['pass'].upper()}" for r in rows]
    colors = {"ff": "tab:blue", "bp": "tab:orange", "up": "tab:green"}
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(14, 7.6), sharex=True)
    positions = range(len(rows))
    top.bar(positions, [r["tops"] for r in rows], color=[colors[r["pass"]] for r in rows])
    for i, row in enumerate(rows):
        paper = row["paper_tops"]
        if isinstance(paper, list):
            top.plot([i - 0.4, i + 0.4], [paper[0]] * 2, "k-", lw=0.8)
            top.plot([i - 0.4, i + 0.4], [paper[1]] * 2, "k-", lw=0.8)
        elif paper is not None:
            top.plot(i, paper, "kD", ms=5)
    top.set_ylabel("throughput (TOPS)")
    top.set_title(f"NeuroTrainer Fig. 13: AlexNet per layer and pass on one module, minibatch {report['batch']}")
    top.legend(handles=[Patch(color=colors["ff"], label="ours: FF (16-bit)"),
                        Patch(color=colors["bp"], label="ours: BP (32-bit, SR-LO)"),
                        Patch(color=colors["up"], label="ours: UP (32-bit, SR-LO)"),
                        Line2D([], [], color="k", marker="D", ls="", label="paper (Fig. 13 / text)"),
                        Line2D([], [], color="k", lw=0.8, label="paper range (two lines)")],
               fontsize=8, ncol=5, loc="upper right")
    bottom.bar(positions, [r["seconds_per_image"] * 1e6 for r in rows], color=[colors[r["pass"]] for r in rows])
    bottom.set_ylabel("latency per image (\u00b5s)")
    bottom.set_xlabel("layer and pass (FF forward, BP backward, UP weight update)")
    bottom.set_xticks(list(positions), labels, fontsize=7)
    figure.text(0.01, 0.005, "ours: the module model (trainforge/sim/neurotrainer); paper: the values its text gives "
                "for Fig. 13, where it gives one; the paper gives no per-layer latencies to compare", fontsize=7)
    figure.tight_layout(rect=(0, 0.02, 1, 1))
    save_figure(figure, path, dpi=110)
    plt.close(figure)


def _scaling(args):
    from trainforge.sim.neurotrainer.system_report import scaling_report
    batch = _batch(args.batch)
    counts = int_list(args.modules, "--modules", 1, 4096)
    if not args.link_gbps > 0:
        raise UsageError(f"--link-gbps = {args.link_gbps} is invalid; allowed: a number > 0")
    report = scaling_report(args.network, batch, counts, link_bytes_per_s=args.link_gbps * 1e9)
    path, plot = save_report(args, f"scaling_{args.network}", report, _plot_scaling)
    if args.json:
        return 0
    print(f"{args.network} synchronous training on N modules, minibatch {batch} per module, "
          f"{report['parameters'] / 1e6:.1f} M weights, link {report['link_bytes_per_s'] / 1e9:.0f} GB/s each way")
    print(f"T1 (one module trains its minibatch) = {report['t1_s'] * 1e3:.2f} ms")
    for key, curve in report["curves"].items():
        print(f"central unit {curve['central_unit']}:")
        print(f"{'N':>6}{'T1 ms':>9}{'T2 ms':>9}{'T3 ms':>9}{'images/s':>10}")
        for point in curve["points"]:
            print(f"{point['modules']:>6}{point['t1_s'] * 1e3:>9.2f}{point['t2_s'] * 1e3:>9.2f}"
                  f"{point['t3_s'] * 1e3:>9.2f}{point['images_per_s']:>10.0f}")
    check = report["alexnet_4_modules_k1"]
    print("AlexNet, 4 modules, Tegra K1 central unit (Sec. 5.3 example):")
    for name in ("ours", "paper"):
        row = check[name]
        print(f"  {name:<6} T1 {row['t1_s'] * 1e3:7.2f} ms, K1 update per dW {row['update_per_dw_s'] * 1e3:6.2f} ms, "
              f"link one way {row['link_s'] * 1e3:5.2f} ms ({row['parameters'] / 1e6:.0f} M weights), "
              f"total {row['total_s'] * 1e3:7.2f} ms")
    print(f"wrote {path} and {plot}")
    return 0


def _plot_scaling(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for curve in report["curves"].values():
        points = curve["points"]
        axis.plot([p["modules"] for p in points], [p["images_per_s"] for p in points], "o-",
                  label=f"central unit: {curve['central_unit']}")
    reference = report["paper_reference"]["p100_images_per_s"]
    for gpus in (1, 2):
        axis.axhline(gpus * reference, ls="--", color="grey", lw=0.8)
        axis.text(1, gpus * reference, f" {gpus} x P100 (paper-quoted {reference}/s each)", fontsize=7, va="bottom")
    if report["network"].lower() == "vgg16":
        axis.plot([64], [1900], "k*", ms=11, label="paper: 64 modules, 1,900 images/s (Sec. 5.3 text)")
    axis.set_xlabel("number of NeuroTrainer modules N")
    axis.set_ylabel("training throughput (images/s)")
    axis.set_title(f"NeuroTrainer Fig. 17(b): {report['network'].upper()} synchronous training, "
                   f"minibatch {report['batch']} per module", fontsize=10)
    axis.legend(fontsize=8, loc="upper left")
    figure.text(0.01, 0.005, "ours: the module model's T1 with the central unit's T2 and T3; paper: only the 64-module "
                "point is given as a number", fontsize=7)
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    save_figure(figure, path, dpi=110)
    plt.close(figure)


def add_commands(commands):
    """Add ``trainforge neurotrainer alexnet`` and ``trainforge neurotrainer scaling``."""
    alexnet = commands.add_parser("alexnet", help="Fig. 13: per-layer FF/BP/UP throughput and latency of AlexNet")
    alexnet.add_argument("--batch", default="32", help="minibatch size (1..4096, default 32 as in the paper)")
    alexnet.add_argument("--out", default=str(REPORTS), help="output directory")
    alexnet.set_defaults(out_kind="dir")
    alexnet.add_argument("--json", action="store_true", help="print the JSON report")
    alexnet.set_defaults(func=_alexnet)
    scaling = commands.add_parser("scaling", help="Fig. 17: multi-module training with a central unit (T1/T2/T3)")
    scaling.add_argument("--network", choices=("vgg16", "alexnet"), default="vgg16", help="network (default vgg16)")
    scaling.add_argument("--batch", default="32", help="minibatch per module (1..4096)")
    scaling.add_argument("--modules", default="1,2,4,8,16,32,64,128", help="comma-separated module counts")
    scaling.add_argument("--link-gbps", type=float, default=120.0,
                         help="module-to-central-unit link, GB/s each way (paper: 240 GB/s, half each way)")
    scaling.add_argument("--out", default=str(REPORTS), help="output directory")
    scaling.set_defaults(out_kind="dir")
    scaling.add_argument("--json", action="store_true", help="print the JSON report")
    scaling.set_defaults(func=_scaling)
