"""``trainforge tensordash``: help text on every option, ``--json`` everywhere, and refused option combinations."""
import argparse
import json

import pytest

from trainforge.cli import build_parser, main
from trainforge.commands.tensordash import cli


def _tensordash_subcommands():
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    tensordash = commands.choices["tensordash"]
    sub = next(action for action in tensordash._actions if isinstance(action, argparse._SubParsersAction))
    return sub.choices


def test_every_option_has_help():
    missing = [f"{name} {'/'.join(action.option_strings)}"
               for name, parser in _tensordash_subcommands().items() for action in parser._actions
               if action.option_strings and not isinstance(action, argparse._HelpAction) and not action.help]
    assert not missing, f"options without help text: {missing}"


@pytest.mark.parametrize("name", ["speedup", "training", "rtl-check", "area", "patterns"])
def test_every_subcommand_has_json(name):
    options = {option for action in _tensordash_subcommands()[name]._actions for option in action.option_strings}
    assert "--json" in options


@pytest.mark.parametrize("argv,option", [
    (["--rtl-figures", "depth"], "--rtl-figures"),
    (["--rtl-sparsities", "0.5"], "--rtl-sparsities"),
    (["--rtl-samples", "8"], "--rtl-samples"),          # its default value, given explicitly: still refused
    (["--rtl-stream-rows", "32"], "--rtl-stream-rows"),
    (["--rtl-seed", "3"], "--rtl-seed"),
    (["--simulator", "icarus"], "--simulator"),
])
def test_rtl_options_without_rtl_are_refused(argv, option, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["tensordash", "speedup", "--samples", "1", "--stream-rows", "8", *argv, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and option in lines[0] and "--rtl" in lines[0], lines
    assert captured.out == ""
    assert not list(tmp_path.rglob("*")), "a refused command wrote something"


def test_several_rtl_options_are_named_on_one_line(tmp_path, capsys):
    assert main(["tensordash", "speedup", "--rtl-seed", "1", "--rtl-figures", "rows", "--out", str(tmp_path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--rtl-seed" in lines[0] and "--rtl-figures" in lines[0], lines
    assert not any(tmp_path.iterdir())


def test_rtl_defaults_are_filled_in_with_rtl():
    args = argparse.Namespace(rtl=True, **{dest: None for dest in cli.RTL_OPTIONS})
    cli._resolve_rtl_options(args)
    assert (args.simulator, args.rtl_samples, args.rtl_stream_rows, args.rtl_seed) == ("verilator", 8, 64, 0)
    assert args.rtl_figures == ["random_sparsity", "depth", "rows", "wide_pe"]
    assert args.rtl_sparsities == [0.1, 0.5, 0.9, 0.99]


def test_speedup_without_rtl_still_runs(tmp_path, capsys):
    assert main(["tensordash", "speedup", "--samples", "1", "--stream-rows", "8", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "speedup.json").read_text())
    assert "rtl" not in report
    assert {path.name for path in tmp_path.glob("*.png")} == {"random_sparsity.png", "depth.png", "rows.png",
                                                              "wide_pe.png"}


def test_area_json(tmp_path, monkeypatch, capsys):
    from trainforge.commands.tensordash import area

    def fake_area(**options):
        return {"params": options, "paper_ratio": 1.14,
                "synth": {"td_pe_cells": 30, "dense_pe_cells": 20, "cell_ratio": 1.5, "td_pe_flip_flops": 3,
                          "dense_pe_flip_flops": 2, "tool": "fake"}}

    monkeypatch.setattr(area, "area_overhead", fake_area)
    assert main(["tensordash", "area", "--lanes", "2", "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((tmp_path / "area_l2_w8_a32_both.json").read_text())
    assert printed["synth"]["cell_ratio"] == 1.5 and printed["params"]["lanes"] == 2
    assert printed["json"] == str(tmp_path / "area_l2_w8_a32_both.json")
    assert written["synth"] == printed["synth"]


def test_rtl_check_json(tmp_path, monkeypatch, capsys):
    from trainforge.commands.tensordash import rtl
    from trainforge.sim.tensordash import training

    row = {"operation": "AxW", "targeted": "A", "stream_rows": 4, "dense_cycles": 4, "golden_cycles": 2,
           "rtl_cycles": 2, "cycles_agree": True, "values_agree": True, "golden_speedup": 2.0, "rtl_speedup": 2.0}
    monkeypatch.setattr(rtl, "require_simulator", lambda simulator: None)
    monkeypatch.setattr(training, "train_and_trace", lambda **options: {"traces": [None]})
    monkeypatch.setattr(rtl, "rtl_layer_check", lambda trace, **options: [row])
    assert main(["tensordash", "rtl-check", "--epochs", "1", "--json", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == [row] and printed["all_agree"] is True and printed["epoch"] == 1
    assert json.loads((tmp_path / "rtl_check_verilator.json").read_text())["rows"] == [row]
