"""Every report kind, made by its command with small arguments, matches its JSON Schema (trainforge/schemas/).

The commands run in-process in one temporary folder (the reports go to its
``build/``). Yosys and nextpnr are replaced by fakes (as in
``verif/test_synth_cache.py``): the synth, fpga and area reports are checked for
their shape, not their figures. matplotlib's rendering is replaced too: every
PNG written is the PNG signature alone. ``tensordash rtl-check`` needs a simulator and
is not run here. Broken copies of real reports must fail validation.
"""
import copy
import json
import pathlib

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="the 'test' extra installs jsonschema")

from trainforge import cli, schemas  # noqa: E402

# One worker builds this module's shared fixture (make test runs xdist with --dist loadgroup).
pytestmark = pytest.mark.xdist_group("report_schemas")

#: Command line -> report files (relative to build/) it must write.
COMMANDS = {
    "verilog dense_pe": ["verilog/manifest.json"],
    "synth dense_pe": ["reports/synth.json"],
    "fpga dense_pe": ["reports/qor.json"],
    "bench --repeat 1 hypar_dp_vgg_e": ["reports/bench.json"],
    "tensordash speedup --samples 2 --stream-rows 16": ["reports/tensordash/speedup.json"],
    "tensordash training --epochs 1": ["reports/tensordash/training.json"],
    "tensordash area --tile 1 2": ["reports/tensordash/area_l4_w8_a32_both.json"],
    "tensordash patterns --max-sets 3 --screen-samples 2 --screen-rows 16 --samples 2 --stream-rows 16 --epochs 1 --finalists 1 --refine-rounds 0": ["reports/tensordash/patterns.json"],
    "neurotrainer lut-error --table-bits 4": ["reports/neurotrainer/lut_error.json"],
    "neurotrainer area --lanes 1": ["reports/neurotrainer/area_l1.json"],
    "neurotrainer alexnet": ["reports/neurotrainer/alexnet.json"],
    "neurotrainer scaling": ["reports/neurotrainer/scaling_vgg16.json"],
    "neurotrainer training --quick --networks mlp": ["reports/neurotrainer/training.json"],
    "caterpillar table2": ["reports/caterpillar/table2.json"],
    "caterpillar utilization --m 32 --n 32": ["reports/caterpillar/gemv_utilization.json"],
    "caterpillar rates --network 500-500-500-10 --method SGD CP --batch 1 --epochs 1 --hidden-scale 0.05 "
    "--evaluations 1 --rate 0.1": ["reports/caterpillar/rates.json"],
    "caterpillar study --network 500-500-500-10 --method SGD --batch 1 --epochs 1 --hidden-scale 0.05 "
    "--evaluations 1": ["reports/caterpillar/study.json"],
    "hypar figures": [f"reports/hypar/{name}.json" for name in
                      ("fig5", "fig6_7", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13", "nodes")],
    "dsm sweep training --values 256 --networks vgg16 --executor serial": ["reports/dsm/fig11_training.json"],
}

#: Report kinds with a schema that no command above makes, and why.
NOT_MADE = {"tensordash_rtl_check": "needs Verilator or Icarus",
            "mutation": "needs a simulator (verif/test_mutate.py validates its report)",
            "coverage": "needs Verilator coverage runs (verif/test_coverage.py validates its summary)"}


def _fake_synthesize(emitted, work_root):
    """A Yosys result whose cell counts depend on the block (so that area ratios are not all 1)."""
    cells = 40 + 7 * len(emitted.block.name) + sum(int(v) for v in emitted.params.values() if isinstance(v, int))
    return {"block": emitted.block.name, "params": emitted.params, "status": "ok", "tool": "Yosys fake (test)",
            "cells": cells, "cells_by_type": {"$_AND_": cells - 9, "$_DFF_P_": 9}}


def _fake_place_and_route(emitted, work_root, seed=None):
    return {"block": emitted.block.name, "params": emitted.params, "seed": seed, "status": "ok", "wrapper_flip_flops": 20,
            "lut4": 120, "ff": 60, "lut4_available": 83640, "ff_available": 83640, "mult18": 4, "mult18_available": 156,
            "bram": 0, "bram_available": 208, "fmax_mhz": 97.5, "meets_board_clock": True, "ff_block": 40,
            "log": "fake.tim"}


def _fake_savefig(figure, target, **options):
    """The PNG signature only: matplotlib's rendering took a fifth of the commands' time here, and the figures'
    pixels are not what this module checks (``verif/test_hypar_cli.py`` and the families' tests render them)."""
    target.write(PNG_SIGNATURE)


#: The first bytes of every PNG file.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    # Session scope: with --dist loadgroup other modules' tests run between this module's on the same worker,
    # and a module-scoped fixture was then torn down and made again (twice 33 s in make test).
    """Run every command of :data:`COMMANDS` in one folder: ``(folder, {command: exit status or exception})``."""
    import matplotlib.figure

    import trainforge.fpga
    import trainforge.synth

    folder = tmp_path_factory.mktemp("reports")
    statuses = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(trainforge.synth, "synthesize", _fake_synthesize)
        patch.setattr(trainforge.fpga, "place_and_route", _fake_place_and_route)
        patch.setattr(matplotlib.figure.Figure, "savefig", _fake_savefig)
        for command in COMMANDS:
            try:
                statuses[command] = cli.main(["--quiet", *command.split()])
            except Exception as error:  # reported by the command's own test
                statuses[command] = error
    return folder, statuses


@pytest.mark.parametrize("command", COMMANDS)
def test_report_matches_its_schema(made, command):
    folder, statuses = made
    assert statuses[command] == 0, f"trainforge {command}: exit status {statuses[command]!r}"
    for name in COMMANDS[command]:
        path = folder / "build" / name
        assert path.is_file(), f"trainforge {command} did not write {name}"
        kind = schemas.kind_of(path)
        assert kind is not None, f"{name}: no report kind"
        assert schemas.validate(path) == [], f"{name} does not match the {kind} schema"
        assert json.loads(path.read_text())["provenance"]["command_line"] == ["trainforge", "--quiet", *command.split()]


def test_every_report_written_has_a_kind_and_every_kind_is_made(made):
    folder, _ = made
    written = sorted((folder / "build").rglob("*.json"))
    assert written, "no report written"
    kinds = {path.relative_to(folder).as_posix(): schemas.kind_of(path) for path in written}
    assert None not in kinds.values(), f"reports without a schema: {[p for p, k in kinds.items() if k is None]}"
    assert set(schemas.kinds()) - set(kinds.values()) == set(NOT_MADE)


@pytest.mark.parametrize("kind", [kind for kind in schemas.kinds()])
def test_schema_is_valid_and_documented(kind):
    schema = schemas.load(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["description"] and schema["title"]
    assert "provenance" in schema["required"]
    for name, field in schema["properties"].items():
        assert field.get("description") or "$ref" in field, f"{kind}: field {name} has no description"


def _report(made, name):
    folder, _ = made
    return json.loads((folder / "build" / name).read_text())


# (report, kind, what is broken, how): each must fail validation, naming the broken field.
BROKEN = [
    ("reports/hypar/fig12.json", "hypar_fig12", "paper/Gmean", lambda r: r["paper"]["Gmean"].pop("htree")),
    ("reports/hypar/fig8.json", "hypar_fig8", "ours/VGG-A/0",
     lambda r: r["ours"]["VGG-A"].__setitem__(0, "272.1")),
    ("reports/caterpillar/table2.json", "caterpillar_table2", "rows/0",
     lambda r: r["rows"][0].pop("paper_gflops_per_w")),
    ("reports/caterpillar/table2.json", "caterpillar_table2", "rows/0/gflops_per_w",
     lambda r: r["rows"][0].__setitem__("gflops_per_w", "201.5")),
    ("reports/tensordash/speedup.json", "tensordash_speedup", "(top)", lambda r: r.pop("wide_pe")),
    ("reports/neurotrainer/alexnet.json", "neurotrainer_alexnet", "rows/0/pass",
     lambda r: r["rows"][0].__setitem__("pass", "forward")),
    ("reports/dsm/fig11_training.json", "dsm_sweep", "summary/vgg16",
     lambda r: r["summary"]["vgg16"].pop("paper_fig11_top_speedup")),
    ("reports/synth.json", "synth", "blocks/0", lambda r: r["blocks"][0].__setitem__("cells", -1)),
    ("reports/bench.json", "bench", "(top)", lambda r: r.pop("provenance")),
    ("verilog/manifest.json", "verilog_manifest", "blocks/0/ports/0/direction",
     lambda r: r["blocks"][0]["ports"][0].__setitem__("direction", "sideways")),
    ("reports/neurotrainer/lut_error.json", "neurotrainer_lut_error", "provenance/source",
     lambda r: r["provenance"].__setitem__("source", "abc")),
]


@pytest.mark.parametrize("name, kind, where, breaks", BROKEN, ids=[f"{k}:{w}" for _, k, w, _ in BROKEN])
def test_broken_report_fails(made, name, kind, where, breaks):
    report = _report(made, name)
    assert schemas.errors(report, kind) == [], "the unbroken report must be valid"
    broken = copy.deepcopy(report)
    breaks(broken)
    found = schemas.errors(broken, kind)
    assert found, f"{name} with {where} broken passed validation"
    assert any(line.startswith(f"{where}:") for line in found), found


def test_kind_of_paths():
    assert schemas.kind_of(pathlib.Path("build/reports/qor.json")) == "fpga"
    assert schemas.kind_of("out/caterpillar/my_study.json") == "caterpillar_study"
    assert schemas.kind_of("x/neurotrainer/scaling_alexnet.json") == "neurotrainer_scaling"
    assert schemas.kind_of("x/hypar/fig5.json") == "hypar_fig5"
    assert schemas.kind_of("x/hypar/unknown.json") is None
    with pytest.raises(LookupError):
        schemas.validate("x/hypar/unknown.json")


# --- make report: build/reports/index.md ------------------------------------------------------------------------

import re  # noqa: E402
import shutil  # noqa: E402

from trainforge.report import deviation  # noqa: E402

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


@pytest.fixture(scope="session")
def index(made, tmp_path_factory):
    """The index of a copy of the reports folder made by :func:`made` (its links point to this checkout)."""
    folder, _ = made
    reports = tmp_path_factory.mktemp("index") / "build" / "reports"
    shutil.copytree(folder / "build" / "reports", reports)
    assert cli.main(["report", "--reports", str(reports)]) == 0
    return reports, (reports / "index.md").read_text()


def _rows(text, source):
    return [line for line in text.splitlines() if line.startswith(f"| [{source.split('/')[-1]}]({source})")]


def test_deviation_by_hand():
    assert deviation(201.5, 177) == "+13.8 %"
    assert deviation(1.48, 4.97) == "-70.2 %"
    assert deviation(4.4, [4.2, 4.7]) == "within"
    assert deviation(3.0, [4.2, 4.7]) == "-28.6 %"
    assert deviation(5.17, [4.2, 4.7]) == "+10.0 %"
    assert deviation(1.0, 0) == "" and deviation("0000", "0011") == "" and deviation(None, 2.0) == ""


def test_index_has_a_section_per_family(index):
    _, text = index
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["hardware flow", "caterpillar", "dsm", "hypar", "neurotrainer", "tensordash"]
    assert "```json" not in text, "no JSON dumps any more"


def test_table2_rows_against_the_paper(index):
    reports, text = index
    table2 = json.loads((reports / "caterpillar" / "table2.json").read_text())
    rows = _rows(text, "caterpillar/table2.json")
    for case in table2["rows"]:
        label = f"{case['network']} on {case['config']}, {case['method']} b={case['batch']}: GFLOPS/W"
        (line,) = [row for row in rows if f"| {label} |" in row]
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert float(cells[2]) == case["paper_gflops_per_w"] and float(cells[3]) == pytest.approx(case["gflops_per_w"],
                                                                                                 rel=1e-3)
        # The caterpillar command computes its own deviation: the index's column must agree with it.
        assert float(cells[4].rstrip(" %")) == pytest.approx(case["deviation"] * 100, abs=0.11)
        assert "hw/caterpillar/README.md#figures-trainforge-caterpillar-table2" in cells[5]


def test_paper_pairs_of_each_family(index):
    _, text = index
    (dsm,) = [row for row in _rows(text, "dsm/fig11_training.json") if "best utilization" in row]
    assert "| 0.79 |" in dsm and "sim/dsm/README.md#paper-vs-ours)" in dsm
    (fig12,) = [row for row in _rows(text, "hypar/fig12.json") if "Gmean on the htree" in row]
    assert "| 3.39 |" in fig12 and "sim/hypar/README.md#paper-vs-ours" in fig12
    (c1,) = [row for row in _rows(text, "neurotrainer/alexnet.json") if "| C1 FF TOPS |" in row]
    assert "| 4.2 to 4.7 |" in c1 and "hw/neurotrainer/README.md#alexnet-minibatch-32" in c1
    (overall,) = [row for row in _rows(text, "tensordash/training.json") if "overall speedup" in row]
    assert "| 1.95 |" in overall and "hw/tensordash/README.md#real-tensors" in overall


def test_report_without_paper_values_lists_its_figures(index):
    reports, text = index
    utilization = json.loads((reports / "caterpillar" / "gemv_utilization.json").read_text())
    rows = _rows(text, "caterpillar/gemv_utilization.json")
    assert len(rows) == len(utilization["rows"])
    for line in rows:
        assert len(line.strip("|").split("|")) == 4, "report | figure | ours | explained in: no paper column"
    first = utilization["rows"][0]
    assert any(f"n_r={first['n_r']}, {first['reduction']}: utilization | {first['utilization']:.4g} |" in line
               for line in rows)


def test_links_and_images_resolve(index):
    reports, text = index
    links = _LINK.findall(text)
    images = {target for bang, _, target in links if bang}
    assert images == {p.relative_to(reports).as_posix() for p in reports.rglob("*.png")}, "every plot, as an image"
    readmes = 0
    for _, _, target in links:
        path, _, anchor = target.partition("#")
        if not path:
            assert f"## {anchor.replace('-', ' ')}" in text, f"no section for #{anchor}"
            continue
        assert (reports / path).is_file(), f"broken link {target}"
        if anchor:
            readmes += 1
            headings = [line.lstrip("#").strip().lower() for line in (reports / path).read_text().splitlines()
                        if line.startswith("#")]
            words = anchor.replace("-", " ").split()
            assert any(words == re.sub(r"[^\w\- ]", "", h).replace("-", " ").split() for h in headings), \
                f"{target}: no such heading"
    assert readmes > 20
    for report in reports.rglob("*.json"):
        relative = report.relative_to(reports).as_posix()
        assert f"- [{relative}]({relative}): {schemas.kind_of(report)}, matches its schema" in text


def test_index_survives_a_broken_and_an_unknown_report(tmp_path):
    reports = tmp_path / "reports"
    (reports / "hypar").mkdir(parents=True)
    (reports / "hypar" / "fig12.json").write_text('{"ours": {"Gmean": {"torus": "fast"}}, "paper": 3}\n')
    (reports / "hypar" / "fig9.json").write_text("{not json\n")
    (reports / "hypar" / "mine.json").write_text('{"a": 1}\n')
    assert cli.main(["report", "--reports", str(reports)]) == 0
    text = (reports / "index.md").read_text()
    assert "- [hypar/fig12.json](hypar/fig12.json): hypar_fig12, unreadable" in text \
        or "- [hypar/fig12.json](hypar/fig12.json): hypar_fig12, DOES NOT match its schema" in text
    assert "- [hypar/fig9.json](hypar/fig9.json): hypar_fig9, unreadable" in text
    assert "- [hypar/mine.json](hypar/mine.json): unknown kind, no schema" in text


def test_empty_reports_folder(tmp_path):
    assert cli.main(["report", "--reports", str(tmp_path / "none")]) == 0
    assert "No reports yet" in (tmp_path / "none" / "index.md").read_text()


def test_index_without_jsonschema_says_not_checked(tmp_path, monkeypatch):
    import sys

    reports = tmp_path / "reports"
    (reports / "hypar").mkdir(parents=True)
    (reports / "hypar" / "fig12.json").write_text(json.dumps(
        {"ours": {"Gmean": {"torus": 2.0, "htree": 3.0}}, "paper": {"Gmean": {"torus": 2.5, "htree": 3.0}}}))
    monkeypatch.setattr(schemas, "_validator", schemas._validator.__wrapped__)  # no cached validator
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import jsonschema raises ImportError
    assert cli.main(["report", "--reports", str(reports)]) == 0
    text = (reports / "index.md").read_text()
    assert "hypar_fig12, schema not checked (jsonschema not installed)" in text
    assert "| Gmean on the torus | 2.5 | 2 | -20.0 % |" in text and "| Gmean on the htree | 3 | 3 | +0.0 % |" in text
