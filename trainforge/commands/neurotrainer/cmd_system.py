"""``trainforge neurotrainer alexnet`` and ``scaling``: the module's figures from the compiled programs (Figs. 13, 17)."""

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


#: The counterfactuals ``alexnet`` runs beside the RTL's hardware (``ModuleTiming`` fields), each explaining a
#: deviation from the paper.
COUNTERFACTUALS = {
    "one element per word": ({"elements_per_request": 1}, "one 16-bit element per 32-bit vault word, every weight "
                                                          "read twice (the RTL before the 16-bit packing)"),
    "no preload": ({"preload_rows": False}, "accumulating passes without the preload row per output row"),
    "free common path": ({"common_interval": 0}, "no limit on the common vault and bus (the tiled convolutions "
                                                 "broadcast their gathered operand)"),
    "both": ({"preload_rows": False, "common_interval": 0}, "no preload and a free common path together"),
}


def _cache(args):
    from trainforge.sim.neurotrainer.system_report import TimingCache
    import pathlib
    return TimingCache(args.cache or pathlib.Path(args.out) / "program_time_cache.json")


def _alexnet(args):
    from trainforge.sim.neurotrainer.system_report import PAPER, buffer_sweep, network_report, with_buffers
    from trainforge.sim.neurotrainer.module import ModuleConfig
    batch = _batch(args.batch)
    kibs = int_list(args.buffers, "--buffers", 1, 1024)
    bad = [kib for kib in kibs if kib & (kib - 1)]
    if bad:
        raise UsageError(f"--buffers = {bad[0]} is invalid; allowed: powers of two (KiB per buffer)")
    cache = _cache(args)
    sweep = buffer_sweep("alexnet", batch, kibs, cache=cache)
    main_kib = 8 if 8 in sweep else kibs[0]
    counterfactuals = {}
    if not args.no_counterfactuals:
        for name, (fields, what) in COUNTERFACTUALS.items():
            counterfactual = network_report("alexnet", batch, with_buffers(ModuleConfig(), main_kib), cache, fields)
            counterfactuals[name] = {"fields": fields, "what": what, "buffer_kib": main_kib,
                                     "rows": counterfactual["rows"], "totals": counterfactual["totals"]}
    report = {"network": "alexnet", "batch": batch, "buffer_kib": kibs, "main_kib": main_kib,
              "rows": sweep[main_kib]["rows"], "not_compiled": sweep[main_kib]["not_compiled"],
              "totals": sweep[main_kib]["totals"],
              "by_buffer": {str(kib): {"rows": rep["rows"], "totals": rep["totals"]} for kib, rep in sweep.items()},
              "counterfactuals": counterfactuals, "config": sweep[main_kib]["config"],
              "parameters": sweep[main_kib]["parameters"], "paper": PAPER}
    path, plot = save_report(args, "alexnet", report, _plot_alexnet)
    if args.json:
        return 0
    print(f"AlexNet on one NeuroTrainer module from the compiled programs, minibatch {batch} (FF 16-bit, BP/UP "
          f"32-bit SR-LO); us per image = minibatch time / batch; buffers {', '.join(f'{k} KiB' for k in kibs)} each")
    head = "".join(f"{f'{k}K us':>9}{f'{k}K TOPS':>9}" for k in kibs)
    print(f"{'layer':<6}{'pass':<5}{'bits':>5}{head}{'paper':>9}{'prep us':>9}  {'bound':<16}largest losses "
          f"({main_kib} KiB)")
    for index, row in enumerate(sweep[main_kib]["rows"]):
        cells = "".join(f"{sweep[k]['rows'][index]['seconds_per_image'] * 1e6:>9.1f}"
                        f"{sweep[k]['rows'][index]['tops']:>9.2f}" for k in kibs)
        print(f"{row['layer']:<6}{row['pass']:<5}{row['bits']:>5}{cells}{_fmt_paper(row['paper_tops']):>9}"
              f"{row['prep_seconds_per_image'] * 1e6:>9.1f}  {row['bound']:<16}{_top_losses(row['loss_fractions'])}")
    for kib in kibs:
        totals = sweep[kib]["totals"]
        print(f"{kib:>3} KiB: inference {totals['inference_s_per_image'] * 1e3:.3f} ms/image (paper "
              f"{PAPER['inference_ms_per_image']}), training {totals['training_s_per_image'] * 1e3:.3f} ms/image "
              f"(paper {PAPER['training_ms_per_image']}), {totals['training_tops']:.2f} TOPS; data preparation "
              f"(im2col gathers) {totals['prep_s_per_image'] * 1e3:.3f} ms/image more")
    for note in sweep[main_kib]["totals"]["not_compiled"]:
        print(f"not compiled, not in the totals: {note}")
    for name, entry in counterfactuals.items():
        totals = entry["totals"]
        print(f"counterfactual '{name}' ({entry['what']}), {main_kib} KiB: inference "
              f"{totals['inference_s_per_image'] * 1e3:.3f} ms/image, training {totals['training_s_per_image'] * 1e3:.3f}"
              f" ms/image")
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
    top.set_title(f"NeuroTrainer Fig. 13: AlexNet per layer and pass on one module (compiled programs, "
                  f"{report['main_kib']} KiB buffers), minibatch {report['batch']}")
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
    figure.text(0.01, 0.005, "ours: the compiled programs timed by sim/neurotrainer/program_time.py; paper: the values its text gives "
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
    report = scaling_report(args.network, batch, counts, link_bytes_per_s=args.link_gbps * 1e9, cache=_cache(args))
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
    fig17 = report["fig17"]
    print(f"Fig. 17 ({args.network}, {fig17['modules']} modules): paper {fig17['paper_images_per_s']} images/s; ours "
          + ", ".join(f"{report['curves'][key]['central_unit']} central {value:.0f}" for key, value in
                      fig17["ours"].items())
          + f" (T1 {fig17['t1_s'] * 1e3:.1f} ms); counterfactual T1 at the module's peak on every pass "
          f"({fig17['t1_at_peak_s'] * 1e3:.1f} ms): "
          + ", ".join(f"{report['curves'][key]['central_unit']} central {value:.0f}" for key, value in
                      fig17["t1_at_peak"].items())
          + "; and with every module on a link of its own (T2 of one module): "
          + ", ".join(f"{report['curves'][key]['central_unit']} central {value:.0f}" for key, value in
                      fig17["t1_at_peak_parallel_links"].items()))
    for note in report["not_compiled"]:
        print(f"not compiled, not in T1: {note}")
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
    alexnet.add_argument("--buffers", default="4,8,16",
                         help="KiB per PE buffer (BUF Input 1, BUF Input 2, BUF Output each), comma-separated powers of "
                              "two (default 4,8,16)")
    alexnet.add_argument("--no-counterfactuals", action="store_true",
                         help="skip the counterfactual runs (one element per word, no preload, free common path)")
    alexnet.add_argument("--cache", default=None, help="layer timing cache file (default OUT/program_time_cache.json)")
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
    scaling.add_argument("--cache", default=None, help="layer timing cache file (default OUT/program_time_cache.json)")
    scaling.add_argument("--out", default=str(REPORTS), help="output directory")
    scaling.set_defaults(out_kind="dir")
    scaling.add_argument("--json", action="store_true", help="print the JSON report")
    scaling.set_defaults(func=_scaling)
